// Linked with one layer's objects and those of every layer below it, and nothing else:
// a call from them into a higher layer leaves an undefined symbol and fails the build.
int main() {
  return 0;
}
