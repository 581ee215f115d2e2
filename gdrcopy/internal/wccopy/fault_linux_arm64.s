//go:build !purego

#include "textflag.h"
#include "fault.h"

// Fault return on arm64 (see fault.go and fault_linux_amd64.s): a kernel
// keeps its cookie in R19 and its entry stack pointer in R20.

// Offsets in the arm64 signal frame (arch/arm64/include/uapi/asm/ucontext.h:
// uc_mcontext at 176; arch/arm64/include/uapi/asm/sigcontext.h: regs[31]
// from 8, sp at 256, pc at 264 within it; si_addr at 16 in siginfo).
#define UC_R0	184
#define UC_R19	336
#define UC_R20	344
#define UC_SP	432
#define UC_PC	440
#define SI_ADDR	16

// func faultHandler()
// Entered by the kernel as void handler(int sig, siginfo_t *info, ucontext_t *uc),
// on the signal stack, with R0 = sig, R1 = info, R2 = uc and LR the
// sigreturn trampoline. R16 and R17 are free to use.
TEXT ·faultHandler(SB), NOSPLIT|NOFRAME, $0-0
	MOVD	UC_SP(R2), R16
	MOVD	UC_R20(R2), R17
	CMP	R16, R17
	BNE	forward
	MOVD	UC_R19(R2), R16
	MOVD	$COOKIE_COPY, R17
	CMP	R16, R17
	BEQ	copyFault
	MOVD	$COOKIE_WORD, R17
	CMP	R16, R17
	BEQ	wordFault

forward:
	MOVD	·prevSIGSEGV(SB), R16
	CMP	$7, R0 // SIGBUS
	BNE	jump
	MOVD	·prevSIGBUS(SB), R16
jump:
	JMP	(R16)

copyFault:
	MOVD	$·fixupCopy(SB), R16
	B	resume
wordFault:
	MOVD	$·fixupWord(SB), R16
resume:
	MOVD	R16, UC_PC(R2)
	MOVD	ZR, UC_R19(R2)
	MOVD	SI_ADDR(R1), R16
	CBNZ	R16, addr
	MOVD	$-1, R16 // NoAddress
addr:
	MOVD	R16, UC_R0(R2)
	RET

// func fixupCopy(dst, src *byte, n int) (fault uintptr)
// Where a copy kernel resumes after a fault, with the kernel's stack and
// link register, so it returns to the kernel's caller.
TEXT ·fixupCopy(SB), NOSPLIT|NOFRAME, $0-32
	MOVD	R0, fault+24(FP)
	RET

// func fixupWord(p *uint64, v uint64) (fault uintptr)
// fixupCopy for the word kernels, whose fault result is at 16.
TEXT ·fixupWord(SB), NOSPLIT|NOFRAME, $0-24
	MOVD	R0, fault+16(FP)
	RET

// func faultHandlerPC() uintptr
TEXT ·faultHandlerPC(SB), NOSPLIT, $0-8
	MOVD	$·faultHandler(SB), R0
	MOVD	R0, ret+0(FP)
	RET
