// Command otherplatform is what TestWheels links into the wheels of the
// platforms other than the machine's: linked by the same go build line
// build.sh runs (static, the same linker and flags, so the same ELF or
// Mach-O headers the wheel's tags are checked against), in a fraction of
// the time torchmem's own link takes. torchmem itself is compiled for
// those platforms (not linked) by the test's GO wrapper.
package main

func main() {}
