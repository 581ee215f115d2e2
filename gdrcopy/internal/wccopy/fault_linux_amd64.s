//go:build !purego

#include "textflag.h"
#include "fault.h"

// Fault return (see fault.go). A kernel marks itself with CATCH: R12 holds
// its cookie and R13 the stack pointer it was entered with, and no kernel
// touches either or the stack pointer until UNCATCH. faultHandler, installed
// for SIGSEGV and SIGBUS, takes a fault for a kernel's only when R12 holds a
// cookie and RSP still equals R13 in the interrupted context; it then resumes
// that context at the kernel's fixup with the fault address in AX. Every
// other fault goes on to the handler that was installed before it, the Go
// runtime's, with the registers and stack as the kernel delivered them.

// Offsets in the x86-64 signal frame (arch/x86/include/uapi/asm/sigcontext.h
// struct sigcontext_64 inside struct ucontext at 40; include/uapi/asm-generic/
// siginfo.h si_addr at 16).
#define UC_R12	72
#define UC_R13	80
#define UC_RAX	144
#define UC_RSP	160
#define UC_RIP	168
#define SI_ADDR	16

// func faultHandler()
// Entered by the kernel as void handler(int sig, siginfo_t *info, ucontext_t *uc),
// on the signal stack: DI = sig, SI = info, DX = uc.
TEXT ·faultHandler(SB), NOSPLIT|NOFRAME, $0-0
	MOVQ	UC_RSP(DX), AX
	CMPQ	AX, UC_R13(DX)
	JNE	forward
	MOVQ	UC_R12(DX), AX
	MOVQ	$COOKIE_COPY, R8
	CMPQ	AX, R8
	JEQ	copyFault
	MOVQ	$COOKIE_WORD, R8
	CMPQ	AX, R8
	JEQ	wordFault

forward:
	MOVQ	·prevSIGBUS(SB), AX
	CMPQ	DI, $7 // SIGBUS
	JEQ	jump
	MOVQ	·prevSIGSEGV(SB), AX
jump:
	JMP	AX

copyFault:
	LEAQ	·fixupCopy(SB), AX
	JMP	resume
wordFault:
	LEAQ	·fixupWord(SB), AX
resume:
	MOVQ	AX, UC_RIP(DX)
	MOVQ	$0, UC_R12(DX)
	MOVQ	SI_ADDR(SI), AX
	TESTQ	AX, AX
	JNZ	addr
	MOVQ	$-1, AX // NoAddress
addr:
	MOVQ	AX, UC_RAX(DX)
	RET

// func fixupCopy(dst, src *byte, n int) (fault uintptr)
// Where a copy kernel resumes after a fault: on the kernel's stack, so it
// returns to the kernel's caller.
TEXT ·fixupCopy(SB), NOSPLIT|NOFRAME, $0-32
	MOVQ	AX, fault+24(FP)
	RET

// func fixupWord(p *uint64, v uint64) (fault uintptr)
// fixupCopy for the word kernels, whose fault result is at 16.
TEXT ·fixupWord(SB), NOSPLIT|NOFRAME, $0-24
	MOVQ	AX, fault+16(FP)
	RET

// func faultHandlerPC() uintptr
TEXT ·faultHandlerPC(SB), NOSPLIT, $0-8
	LEAQ	·faultHandler(SB), AX
	MOVQ	AX, ret+0(FP)
	RET
