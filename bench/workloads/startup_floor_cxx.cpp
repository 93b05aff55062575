// The C++ case of startup_floor.c: a program that news one int and deletes
// it (libstdc++ is in the process whatever the allocator). Prints nothing:
// startup_floor measures it.
int main() {
  int* volatile object = new int(1);
  delete object;
  return 0;
}
