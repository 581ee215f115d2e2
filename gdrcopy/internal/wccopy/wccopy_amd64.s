//go:build !purego

// Hand-written (no generator). The kernels follow the WC ladder of
// libgdrapi 2.6 (src/memcpy_sse.c, src/memcpy_sse41.c, src/memcpy_avx.c,
// src/memcpy_avx2.c, src/memcpy_movdir64b.c; see the package comment).
//
// Register use in every kernel:
//	DI	destination
//	SI	source
//	CX	bytes left
//	AX	scratch for the 1- to 8-byte accesses
//	R12, R13	the fault-return mark (CATCH), untouched otherwise
//	X0-X7, Y0-Y3	vector scratch
// The device pointer, whose alignment drives the ladder, is DI in the store
// kernels and SI in the load kernels; the macros call it DEV. The store
// kernels end with SFENCE and the load kernels with no fence (see
// "Ordering" in the package comment). The store kernels stream whole 64-byte
// lines only; a 16- or 32-byte store that fills part of a line is a plain
// MOVOU or VMOVDQU (see step 3 of the package comment).

#include "textflag.h"
#include "fault.h"

// SMALL(DEV) lets a copy of fewer than 16 bytes whose DEV is 16-byte
// aligned fall through to the TAIL that follows it, taking no branch; every
// other copy goes to head. Each kernel is laid out SMALL, TAIL, its return,
// then HEAD and the vector steps, which jump back to tail.
#define SMALL(DEV) \
	CMPQ	CX, $16; \
	JAE	head; \
	TESTQ	$15, DEV; \
	JNZ	head

// HEAD(DEV) moves one, two, four and then eight bytes, each access naturally
// aligned, as far as DEV's alignment needs it, until DEV is 16-byte aligned;
// an aligned DEV skips the steps with one test. If CX is too short for the
// next step it jumps to tail (CX is then smaller than DEV's alignment, so
// the tail's accesses stay aligned); it also jumps there when fewer than 16
// bytes remain at the end.
#define HEAD(DEV) \
head: \
	TESTQ	$15, DEV; \
	JZ	head16; \
	TESTQ	$1, DEV; \
	JZ	head2; \
	CMPQ	CX, $1; \
	JB	tail; \
	MOVBLZX	(SI), AX; \
	MOVB	AX, (DI); \
	INCQ	SI; \
	INCQ	DI; \
	DECQ	CX; \
head2: \
	TESTQ	$2, DEV; \
	JZ	head4; \
	CMPQ	CX, $2; \
	JB	tail; \
	MOVWLZX	(SI), AX; \
	MOVW	AX, (DI); \
	ADDQ	$2, SI; \
	ADDQ	$2, DI; \
	SUBQ	$2, CX; \
head4: \
	TESTQ	$4, DEV; \
	JZ	head8; \
	CMPQ	CX, $4; \
	JB	tail; \
	MOVL	(SI), AX; \
	MOVL	AX, (DI); \
	ADDQ	$4, SI; \
	ADDQ	$4, DI; \
	SUBQ	$4, CX; \
head8: \
	TESTQ	$8, DEV; \
	JZ	head16; \
	CMPQ	CX, $8; \
	JB	tail; \
	MOVQ	(SI), AX; \
	MOVQ	AX, (DI); \
	ADDQ	$8, SI; \
	ADDQ	$8, DI; \
	SUBQ	$8, CX; \
head16: \
	CMPQ	CX, $16; \
	JB	tail

// TAIL moves the last CX < 16 bytes with eight-, four-, two- and one-byte
// accesses, in that order, each naturally aligned because the device pointer
// is aligned at least as much as the widest of them. It stops as soon as
// nothing is left, so that a word-sized copy is one access.
#define TAIL \
tail: \
	TESTQ	$8, CX; \
	JZ	tail4; \
	MOVQ	(SI), AX; \
	MOVQ	AX, (DI); \
	TESTQ	$7, CX; \
	JZ	tailDone; \
	ADDQ	$8, SI; \
	ADDQ	$8, DI; \
tail4: \
	TESTQ	$4, CX; \
	JZ	tail2; \
	MOVL	(SI), AX; \
	MOVL	AX, (DI); \
	TESTQ	$3, CX; \
	JZ	tailDone; \
	ADDQ	$4, SI; \
	ADDQ	$4, DI; \
tail2: \
	TESTQ	$2, CX; \
	JZ	tail1; \
	MOVWLZX	(SI), AX; \
	MOVW	AX, (DI); \
	ADDQ	$2, SI; \
	ADDQ	$2, DI; \
tail1: \
	TESTQ	$1, CX; \
	JZ	tailDone; \
	MOVBLZX	(SI), AX; \
	MOVB	AX, (DI); \
tailDone:

// ADVANCE(N) moves both pointers N bytes on and counts N bytes off.
#define ADVANCE(N) \
	ADDQ	$N, SI; \
	ADDQ	$N, DI; \
	SUBQ	$N, CX

// CATCH(COOKIE) and UNCATCH bracket a kernel's accesses for fault return:
// see faultHandler below.
#define CATCH(COOKIE) \
	MOVQ	$COOKIE, R12; \
	MOVQ	SP, R13
#define UNCATCH \
	XORL	R12, R12

// MOVDIR64B_SI_DI is MOVDIR64B (SI), DI: a 64-byte direct store of the
// bytes at SI to the 64-byte aligned address in DI. The Go assembler has no
// mnemonic for it; the encoding is 66 0F 38 F8 /r with ModRM 0x3E
// (mod = 00, reg = DI, r/m = SI).
#define MOVDIR64B_SI_DI \
	BYTE	$0x66; BYTE $0x0F; BYTE $0x38; BYTE $0xF8; BYTE $0x3E

// MOVDIR64B_SI64_DI is MOVDIR64B 64(SI), DI: ModRM 0x7E (mod = 01, an
// 8-bit displacement) and the displacement 0x40.
#define MOVDIR64B_SI64_DI \
	BYTE	$0x66; BYTE $0x0F; BYTE $0x38; BYTE $0xF8; BYTE $0x7E; BYTE $0x40

// func storeSSE2(dst, src *byte, n int) (fault uintptr)
// Requires: SSE2
TEXT ·storeSSE2(SB), NOSPLIT, $0-32
	CATCH(COOKIE_COPY)
	MOVQ	dst+0(FP), DI
	MOVQ	src+8(FP), SI
	MOVQ	n+16(FP), CX
	SMALL(DI)
	TAIL
	SFENCE
	UNCATCH
	MOVQ	$0, fault+24(FP)
	RET

	HEAD(DI)
	TESTQ	$16, DI
	JZ	align64
	MOVOU	(SI), X0
	MOVOU	X0, (DI)
	ADVANCE(16)

align64:
	TESTQ	$32, DI
	JZ	bulk
	CMPQ	CX, $32
	JB	last16
	MOVOU	(SI), X0
	MOVOU	16(SI), X1
	MOVOU	X0, (DI)
	MOVOU	X1, 16(DI)
	ADVANCE(32)

bulk:
	CMPQ	CX, $128
	JB	last64

loop128:
	MOVOU	(SI), X0
	MOVOU	16(SI), X1
	MOVOU	32(SI), X2
	MOVOU	48(SI), X3
	MOVOU	64(SI), X4
	MOVOU	80(SI), X5
	MOVOU	96(SI), X6
	MOVOU	112(SI), X7
	MOVNTO	X0, (DI)
	MOVNTO	X1, 16(DI)
	MOVNTO	X2, 32(DI)
	MOVNTO	X3, 48(DI)
	MOVNTO	X4, 64(DI)
	MOVNTO	X5, 80(DI)
	MOVNTO	X6, 96(DI)
	MOVNTO	X7, 112(DI)
	ADVANCE(128)
	CMPQ	CX, $128
	JAE	loop128

last64:
	CMPQ	CX, $64
	JB	last16
	MOVOU	(SI), X0
	MOVOU	16(SI), X1
	MOVOU	32(SI), X2
	MOVOU	48(SI), X3
	MOVNTO	X0, (DI)
	MOVNTO	X1, 16(DI)
	MOVNTO	X2, 32(DI)
	MOVNTO	X3, 48(DI)
	ADVANCE(64)

last16:
	CMPQ	CX, $16
	JB	tail
	MOVOU	(SI), X0
	MOVOU	X0, (DI)
	ADVANCE(16)
	JMP	last16

// func loadSSE41(dst, src *byte, n int) (fault uintptr)
// Requires: SSE4.1
TEXT ·loadSSE41(SB), NOSPLIT, $0-32
	CATCH(COOKIE_COPY)
	MOVQ	dst+0(FP), DI
	MOVQ	src+8(FP), SI
	MOVQ	n+16(FP), CX
	SMALL(SI)
	TAIL
	UNCATCH
	MOVQ	$0, fault+24(FP)
	RET

	HEAD(SI)
	TESTQ	$16, SI
	JZ	align64
	MOVNTDQA	(SI), X0
	MOVOU	X0, (DI)
	ADVANCE(16)

align64:
	TESTQ	$32, SI
	JZ	bulk
	CMPQ	CX, $32
	JB	last16
	MOVNTDQA	(SI), X0
	MOVNTDQA	16(SI), X1
	MOVOU	X0, (DI)
	MOVOU	X1, 16(DI)
	ADVANCE(32)

bulk:
	CMPQ	CX, $128
	JB	last64

loop128:
	MOVNTDQA	(SI), X0
	MOVNTDQA	16(SI), X1
	MOVNTDQA	32(SI), X2
	MOVNTDQA	48(SI), X3
	MOVNTDQA	64(SI), X4
	MOVNTDQA	80(SI), X5
	MOVNTDQA	96(SI), X6
	MOVNTDQA	112(SI), X7
	MOVOU	X0, (DI)
	MOVOU	X1, 16(DI)
	MOVOU	X2, 32(DI)
	MOVOU	X3, 48(DI)
	MOVOU	X4, 64(DI)
	MOVOU	X5, 80(DI)
	MOVOU	X6, 96(DI)
	MOVOU	X7, 112(DI)
	ADVANCE(128)
	CMPQ	CX, $128
	JAE	loop128

last64:
	CMPQ	CX, $64
	JB	last16
	MOVNTDQA	(SI), X0
	MOVNTDQA	16(SI), X1
	MOVNTDQA	32(SI), X2
	MOVNTDQA	48(SI), X3
	MOVOU	X0, (DI)
	MOVOU	X1, 16(DI)
	MOVOU	X2, 32(DI)
	MOVOU	X3, 48(DI)
	ADVANCE(64)

last16:
	CMPQ	CX, $16
	JB	tail
	MOVNTDQA	(SI), X0
	MOVOU	X0, (DI)
	ADVANCE(16)
	JMP	last16

// func storeAVX2(dst, src *byte, n int) (fault uintptr)
// Requires: AVX
TEXT ·storeAVX2(SB), NOSPLIT, $0-32
	CATCH(COOKIE_COPY)
	MOVQ	dst+0(FP), DI
	MOVQ	src+8(FP), SI
	MOVQ	n+16(FP), CX
	SMALL(DI)
	TAIL
	SFENCE
	UNCATCH
	MOVQ	$0, fault+24(FP)
	RET

	HEAD(DI)
	TESTQ	$16, DI
	JZ	align64
	VMOVDQU	(SI), X0
	VMOVDQU	X0, (DI)
	ADVANCE(16)

align64:
	TESTQ	$32, DI
	JZ	bulk
	CMPQ	CX, $32
	JB	last16
	VMOVDQU	(SI), Y0
	VMOVDQU	Y0, (DI)
	ADVANCE(32)

bulk:
	CMPQ	CX, $128
	JB	last64

loop128:
	VMOVDQU	(SI), Y0
	VMOVDQU	32(SI), Y1
	VMOVDQU	64(SI), Y2
	VMOVDQU	96(SI), Y3
	VMOVNTDQ	Y0, (DI)
	VMOVNTDQ	Y1, 32(DI)
	VMOVNTDQ	Y2, 64(DI)
	VMOVNTDQ	Y3, 96(DI)
	ADVANCE(128)
	CMPQ	CX, $128
	JAE	loop128

last64:
	CMPQ	CX, $64
	JB	last32
	VMOVDQU	(SI), Y0
	VMOVDQU	32(SI), Y1
	VMOVNTDQ	Y0, (DI)
	VMOVNTDQ	Y1, 32(DI)
	ADVANCE(64)

last32:
	CMPQ	CX, $32
	JB	last16
	VMOVDQU	(SI), Y0
	VMOVDQU	Y0, (DI)
	ADVANCE(32)

last16:
	CMPQ	CX, $16
	JB	vdone
	VMOVDQU	(SI), X0
	VMOVDQU	X0, (DI)
	ADVANCE(16)

vdone:
	VZEROUPPER
	TESTQ	CX, CX
	JNZ	tail
	JMP	tailDone

// func loadAVX2(dst, src *byte, n int) (fault uintptr)
// Requires: AVX, AVX2
TEXT ·loadAVX2(SB), NOSPLIT, $0-32
	CATCH(COOKIE_COPY)
	MOVQ	dst+0(FP), DI
	MOVQ	src+8(FP), SI
	MOVQ	n+16(FP), CX
	SMALL(SI)
	TAIL
	UNCATCH
	MOVQ	$0, fault+24(FP)
	RET

	HEAD(SI)
	TESTQ	$16, SI
	JZ	align64
	VMOVNTDQA	(SI), X0
	VMOVDQU	X0, (DI)
	ADVANCE(16)

align64:
	TESTQ	$32, SI
	JZ	bulk
	CMPQ	CX, $32
	JB	last16
	VMOVNTDQA	(SI), Y0
	VMOVDQU	Y0, (DI)
	ADVANCE(32)

bulk:
	CMPQ	CX, $128
	JB	last64

loop128:
	VMOVNTDQA	(SI), Y0
	VMOVNTDQA	32(SI), Y1
	VMOVNTDQA	64(SI), Y2
	VMOVNTDQA	96(SI), Y3
	VMOVDQU	Y0, (DI)
	VMOVDQU	Y1, 32(DI)
	VMOVDQU	Y2, 64(DI)
	VMOVDQU	Y3, 96(DI)
	ADVANCE(128)
	CMPQ	CX, $128
	JAE	loop128

last64:
	CMPQ	CX, $64
	JB	last32
	VMOVNTDQA	(SI), Y0
	VMOVNTDQA	32(SI), Y1
	VMOVDQU	Y0, (DI)
	VMOVDQU	Y1, 32(DI)
	ADVANCE(64)

last32:
	CMPQ	CX, $32
	JB	last16
	VMOVNTDQA	(SI), Y0
	VMOVDQU	Y0, (DI)
	ADVANCE(32)

last16:
	CMPQ	CX, $16
	JB	vdone
	VMOVNTDQA	(SI), X0
	VMOVDQU	X0, (DI)
	ADVANCE(16)

vdone:
	VZEROUPPER
	TESTQ	CX, CX
	JNZ	tail
	JMP	tailDone

// func storeMOVDIR64B(dst, src *byte, n int) (fault uintptr)
// Requires: AVX, MOVDIR64B
TEXT ·storeMOVDIR64B(SB), NOSPLIT, $0-32
	CATCH(COOKIE_COPY)
	MOVQ	dst+0(FP), DI
	MOVQ	src+8(FP), SI
	MOVQ	n+16(FP), CX
	SMALL(DI)
	TAIL
	SFENCE
	UNCATCH
	MOVQ	$0, fault+24(FP)
	RET

	HEAD(DI)
	TESTQ	$16, DI
	JZ	align64
	VMOVDQU	(SI), X0
	VMOVDQU	X0, (DI)
	ADVANCE(16)

align64:
	TESTQ	$32, DI
	JZ	bulk
	CMPQ	CX, $32
	JB	last16
	VMOVDQU	(SI), Y0
	VMOVDQU	Y0, (DI)
	ADVANCE(32)

bulk:
	CMPQ	CX, $256
	JB	last64

	// Four direct stores per iteration; the destination register takes no
	// displacement, so DI steps after each.
loop256:
	MOVDIR64B_SI_DI
	ADDQ	$64, DI
	MOVDIR64B_SI64_DI
	ADDQ	$64, DI
	ADDQ	$128, SI
	MOVDIR64B_SI_DI
	ADDQ	$64, DI
	MOVDIR64B_SI64_DI
	ADDQ	$64, DI
	ADDQ	$128, SI
	SUBQ	$256, CX
	CMPQ	CX, $256
	JAE	loop256

last64:
	CMPQ	CX, $64
	JB	last32
	MOVDIR64B_SI_DI
	ADVANCE(64)
	JMP	last64

last32:
	CMPQ	CX, $32
	JB	last16
	VMOVDQU	(SI), Y0
	VMOVDQU	Y0, (DI)
	ADVANCE(32)

last16:
	CMPQ	CX, $16
	JB	vdone
	VMOVDQU	(SI), X0
	VMOVDQU	X0, (DI)
	ADVANCE(16)

vdone:
	VZEROUPPER
	TESTQ	CX, CX
	JNZ	tail
	JMP	tailDone

// func storeKernel(dst, src *byte, n int) (fault uintptr)
// ToDevice's kernel: a jump, with the frame as it came, to the store
// kernel of the first variant the gates allow (wccopy_amd64.go variants).
// The best variant is reached with no branch taken before the jump.
TEXT ·storeKernel(SB), NOSPLIT, $0-32
	CMPB	·useMOVDIR64B(SB), $0
	JEQ	noMOVDIR64B
	JMP	·storeMOVDIR64B(SB)
noMOVDIR64B:
	CMPB	·useAVX2(SB), $0
	JEQ	noAVX2
	JMP	·storeAVX2(SB)
noAVX2:
	JMP	·storeSSE2(SB)

// func loadKernel(dst, src *byte, n int) (fault uintptr)
// FromDevice's kernel, as storeKernel; without SSE4.1 it is the generic
// kernel's.
TEXT ·loadKernel(SB), NOSPLIT, $0-32
	CMPB	·useAVX2(SB), $0
	JEQ	noAVX2
	JMP	·loadAVX2(SB)
noAVX2:
	CMPB	·useSSE41(SB), $0
	JEQ	noSSE41
	JMP	·loadSSE41(SB)
noSSE41:
	JMP	·loadGeneric(SB)

// func cpuid(leaf, subleaf uint32) (eax, ebx, ecx, edx uint32)
TEXT ·cpuid(SB), NOSPLIT, $0-24
	MOVL	leaf+0(FP), AX
	MOVL	subleaf+4(FP), CX
	CPUID
	MOVL	AX, eax+8(FP)
	MOVL	BX, ebx+12(FP)
	MOVL	CX, ecx+16(FP)
	MOVL	DX, edx+20(FP)
	RET

// The word kernels: one naturally aligned access and its fence (see
// "Ordering" in the package comment). The stores end with SFENCE, as the
// store kernels do; the loads with MFENCE, which keeps every later load,
// streaming loads included, behind them (Intel SDM vol. 2, MOVNTDQA).

// func store32(p *uint32, v uint32) (fault uintptr)
TEXT ·store32(SB), NOSPLIT, $0-24
	CATCH(COOKIE_WORD)
	MOVQ	p+0(FP), DI
	MOVL	v+8(FP), AX
	MOVL	AX, (DI)
	SFENCE
	UNCATCH
	MOVQ	$0, fault+16(FP)
	RET

// func store64(p *uint64, v uint64) (fault uintptr)
TEXT ·store64(SB), NOSPLIT, $0-24
	CATCH(COOKIE_WORD)
	MOVQ	p+0(FP), DI
	MOVQ	v+8(FP), AX
	MOVQ	AX, (DI)
	SFENCE
	UNCATCH
	MOVQ	$0, fault+16(FP)
	RET

// func load32(p *uint32) (v uint32, fault uintptr)
TEXT ·load32(SB), NOSPLIT, $0-24
	CATCH(COOKIE_WORD)
	MOVQ	p+0(FP), SI
	MOVL	(SI), AX
	MFENCE
	UNCATCH
	MOVL	AX, v+8(FP)
	MOVQ	$0, fault+16(FP)
	RET

// func load64(p *uint64) (v uint64, fault uintptr)
TEXT ·load64(SB), NOSPLIT, $0-24
	CATCH(COOKIE_WORD)
	MOVQ	p+0(FP), SI
	MOVQ	(SI), AX
	MFENCE
	UNCATCH
	MOVQ	AX, v+8(FP)
	MOVQ	$0, fault+16(FP)
	RET
