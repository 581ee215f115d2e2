// The cookies the assembly kernels keep in a register while they run, for
// the fault handler to know them by (see fault.go): one for the copy
// kernels, whose fault result is at 24(FP), one for the word kernels, at
// 16(FP). They spell "gdrcpyC1" and "gdrcpyW1".
#define COOKIE_COPY	0x6764726370794331
#define COOKIE_WORD	0x6764726370795731
