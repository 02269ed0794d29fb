// The link checks' main (cmake/Layers.cmake): never run, it only lets a layer's objects be
// linked into an executable so that an undefined reference (a call into a higher layer)
// fails the build.
int main() { return 0; }
