# A real program's buffer growth under any preloaded allocator: CPython grows a bytearray
# to 320 MB by 64 KiB appends (realloc of one buffer far past 2 MiB), then builds a list
# of 200 thousand strings, joins them and fills a dict of 300 thousand entries.
# Prints the sizes and the elapsed ms. Usage: LD_PRELOAD=<lib> python3 bench/workloads/grow.py
import time

start = time.time()
buf = bytearray()
piece = b"x" * 65536
for _ in range(5000):
    buf += piece
keys = ["k%d" % i for i in range(200000)]
joined = ",".join(keys)
table = {i: str(i) * 3 for i in range(300000)}
print(len(buf), len(joined), len(table), round((time.time() - start) * 1000))
