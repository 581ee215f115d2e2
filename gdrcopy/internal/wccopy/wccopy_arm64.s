//go:build !purego

// Hand-written (no generator). The kernels follow the WC ladder of
// libgdrapi 2.6 on aarch64 (gdrapi.c gdr_copy_to_mapping_internal and
// gdr_copy_from_mapping_internal with memcpy_uncached_store_arm64 and
// memcpy_uncached_load_arm64 for the 16- and 32-byte steps, and
// src/memcpy_neon.c for the 64-byte bulk; see the package comment).
//
// Register use in every kernel:
//	R0	destination
//	R1	source
//	R2	bytes left
//	R3, R4	scratch for the 1- to 16-byte accesses
//	V0-V3	vector scratch
//	R19, R20	the fault-return mark (CATCH), untouched otherwise
// The device pointer, whose alignment drives the ladder, is R0 in the store
// kernels and R1 in the load kernels; the macros call it DEV. Every access
// post-increments its pointer.

#include "textflag.h"
#include "fault.h"

// CATCH(COOKIE) and UNCATCH bracket a kernel's accesses for fault return:
// R19 holds the cookie and R20 the stack pointer the kernel was entered
// with (see fault_linux_arm64.s).
#define CATCH(COOKIE) \
	MOVD	$COOKIE, R19; \
	MOVD	RSP, R20
#define UNCATCH \
	MOVD	ZR, R19

// SMALL(DEV) lets a copy of fewer than 16 bytes whose DEV is 16-byte
// aligned fall through to the TAIL that follows it, taking no branch; every
// other copy goes to head. Each kernel is laid out SMALL, TAIL, its return,
// then HEAD and the vector steps, which branch back to tail.
#define SMALL(DEV) \
	CMP	$16, R2; \
	BHS	head; \
	TST	$15, DEV; \
	BNE	head

// HEAD(DEV) moves one, two, four and then eight bytes, each access naturally
// aligned, as far as DEV's alignment needs it, until DEV is 16-byte aligned;
// an aligned DEV skips the steps with one test. If R2 is too short for the
// next step it jumps to tail (R2 is then smaller than DEV's alignment, so
// the tail's accesses stay aligned); it also jumps there when fewer than 16
// bytes remain at the end.
#define HEAD(DEV) \
head: \
	TST	$15, DEV; \
	BEQ	head16; \
	TBZ	$0, DEV, head2; \
	CBZ	R2, tail; \
	MOVBU.P	1(R1), R3; \
	MOVB.P	R3, 1(R0); \
	SUB	$1, R2; \
head2: \
	TBZ	$1, DEV, head4; \
	CMP	$2, R2; \
	BLO	tail; \
	MOVHU.P	2(R1), R3; \
	MOVH.P	R3, 2(R0); \
	SUB	$2, R2; \
head4: \
	TBZ	$2, DEV, head8; \
	CMP	$4, R2; \
	BLO	tail; \
	MOVWU.P	4(R1), R3; \
	MOVW.P	R3, 4(R0); \
	SUB	$4, R2; \
head8: \
	TBZ	$3, DEV, head16; \
	CMP	$8, R2; \
	BLO	tail; \
	MOVD.P	8(R1), R3; \
	MOVD.P	R3, 8(R0); \
	SUB	$8, R2; \
head16: \
	CMP	$16, R2; \
	BLO	tail

// COPY16 moves 16 bytes with one LDP and one STP of two doublewords, the
// 128-bit access of memcpy_uncached_store_arm64 and
// memcpy_uncached_load_arm64.
#define COPY16 \
	LDP.P	16(R1), (R3, R4); \
	STP.P	(R3, R4), 16(R0)

// STEPS(DEV) does the single 16-byte step that brings DEV to 32-byte
// alignment and the single 32-byte step that brings it to 64, each only if
// DEV needs it and R2 is long enough. R2 >= 16 and DEV is 16-byte aligned
// on entry. It leaves DEV 64-byte aligned unless fewer than 32 bytes are
// left, and jumps to chunk16 in that case.
#define STEPS(DEV) \
	TBZ	$4, DEV, step32; \
	COPY16; \
	SUB	$16, R2; \
step32: \
	CMP	$32, R2; \
	BLO	chunk16; \
	TBZ	$5, DEV, bulk; \
	COPY16; \
	COPY16; \
	SUB	$32, R2

// CHUNKS moves what the bulk left: 32-byte chunks, then a 16-byte one.
#define CHUNKS \
chunk32: \
	CMP	$32, R2; \
	BLO	chunk16; \
	COPY16; \
	COPY16; \
	SUB	$32, R2; \
	B	chunk32; \
chunk16: \
	CMP	$16, R2; \
	BLO	tail; \
	COPY16; \
	SUB	$16, R2

// NEON64 moves the 64-byte aligned bulk in 64-byte LD1/ST1 of four vector
// registers, as src/memcpy_neon.c does (vld1q_u8_x4, vst1q_u8_x4).
#define NEON64 \
bulk: \
	CMP	$64, R2; \
	BLO	chunk32; \
	VLD1.P	64(R1), [V0.B16, V1.B16, V2.B16, V3.B16]; \
	VST1.P	[V0.B16, V1.B16, V2.B16, V3.B16], 64(R0); \
	SUB	$64, R2; \
	B	bulk

// STP32 is the bulk without NEON: libgdrapi then has no 64-byte kernel and
// falls through to its 32-byte chunks.
#define STP32 \
bulk: \
	B	chunk32

// TAIL moves the last R2 < 16 bytes with eight-, four-, two- and one-byte
// accesses, in that order, each naturally aligned because the device
// pointer is aligned at least as much as the widest of them. It stops as
// soon as nothing is left, so that a word-sized copy is one access.
#define TAIL \
tail: \
	TBZ	$3, R2, tail4; \
	MOVD.P	8(R1), R3; \
	MOVD.P	R3, 8(R0); \
	TST	$7, R2; \
	BEQ	done; \
tail4: \
	TBZ	$2, R2, tail2; \
	MOVWU.P	4(R1), R3; \
	MOVW.P	R3, 4(R0); \
	TST	$3, R2; \
	BEQ	done; \
tail2: \
	TBZ	$1, R2, tail1; \
	MOVHU.P	2(R1), R3; \
	MOVH.P	R3, 2(R0); \
tail1: \
	TBZ	$0, R2, done; \
	MOVBU	(R1), R3; \
	MOVB	R3, (R0); \
done:

// The barriers (see the package comment, "Ordering"). Every store kernel
// ends with DMB ST, libgdrapi's wc_store_fence on aarch64: each store it
// made is observed before any later store. The word loads end with DMB LD:
// the load is observed before every later load and store. The word stores
// are store-releases (STLR), observed after every earlier load and store,
// and end with DMB ST as the copies do. The copies from the device end with
// no barrier: DMB ST, which libgdrapi issues there, orders no load.
#define STORE_FENCE	DMB	$0xe
#define LOAD_FENCE	DMB	$0xd

// func storeNEON(dst, src *byte, n int) (fault uintptr)
TEXT ·storeNEON(SB), NOSPLIT, $0-32
	CATCH(COOKIE_COPY)
	MOVD	dst+0(FP), R0
	MOVD	src+8(FP), R1
	MOVD	n+16(FP), R2
	SMALL(R0)
	TAIL
	STORE_FENCE
	UNCATCH
	MOVD	ZR, fault+24(FP)
	RET

	HEAD(R0)
	STEPS(R0)
	NEON64
	CHUNKS
	B	tail

// func loadNEON(dst, src *byte, n int) (fault uintptr)
TEXT ·loadNEON(SB), NOSPLIT, $0-32
	CATCH(COOKIE_COPY)
	MOVD	dst+0(FP), R0
	MOVD	src+8(FP), R1
	MOVD	n+16(FP), R2
	SMALL(R1)
	TAIL
	UNCATCH
	MOVD	ZR, fault+24(FP)
	RET

	HEAD(R1)
	STEPS(R1)
	NEON64
	CHUNKS
	B	tail

// func storeSTP(dst, src *byte, n int) (fault uintptr)
TEXT ·storeSTP(SB), NOSPLIT, $0-32
	CATCH(COOKIE_COPY)
	MOVD	dst+0(FP), R0
	MOVD	src+8(FP), R1
	MOVD	n+16(FP), R2
	SMALL(R0)
	TAIL
	STORE_FENCE
	UNCATCH
	MOVD	ZR, fault+24(FP)
	RET

	HEAD(R0)
	STEPS(R0)
	STP32
	CHUNKS
	B	tail

// func loadSTP(dst, src *byte, n int) (fault uintptr)
TEXT ·loadSTP(SB), NOSPLIT, $0-32
	CATCH(COOKIE_COPY)
	MOVD	dst+0(FP), R0
	MOVD	src+8(FP), R1
	MOVD	n+16(FP), R2
	SMALL(R1)
	TAIL
	UNCATCH
	MOVD	ZR, fault+24(FP)
	RET

	HEAD(R1)
	STEPS(R1)
	STP32
	CHUNKS
	B	tail

// func storeKernel(dst, src *byte, n int) (fault uintptr)
// ToDevice's kernel: a jump, with the frame and link register as they came,
// to the store kernel of the first variant the gate allows
// (wccopy_arm64.go variants). The best variant is reached with no branch
// taken before the jump.
TEXT ·storeKernel(SB), NOSPLIT|NOFRAME, $0-32
	MOVBU	·useNEON(SB), R3
	CBZ	R3, noNEON
	JMP	·storeNEON(SB)
noNEON:
	JMP	·storeSTP(SB)

// func loadKernel(dst, src *byte, n int) (fault uintptr)
// FromDevice's kernel, as storeKernel.
TEXT ·loadKernel(SB), NOSPLIT|NOFRAME, $0-32
	MOVBU	·useNEON(SB), R3
	CBZ	R3, noNEON
	JMP	·loadNEON(SB)
noNEON:
	JMP	·loadSTP(SB)

// The word kernels: one naturally aligned access and its barrier.

// func store32(p *uint32, v uint32) (fault uintptr)
TEXT ·store32(SB), NOSPLIT, $0-24
	CATCH(COOKIE_WORD)
	MOVD	p+0(FP), R0
	MOVWU	v+8(FP), R1
	STLRW	R1, (R0)
	STORE_FENCE
	UNCATCH
	MOVD	ZR, fault+16(FP)
	RET

// func store64(p *uint64, v uint64) (fault uintptr)
TEXT ·store64(SB), NOSPLIT, $0-24
	CATCH(COOKIE_WORD)
	MOVD	p+0(FP), R0
	MOVD	v+8(FP), R1
	STLR	R1, (R0)
	STORE_FENCE
	UNCATCH
	MOVD	ZR, fault+16(FP)
	RET

// func load32(p *uint32) (v uint32, fault uintptr)
TEXT ·load32(SB), NOSPLIT, $0-24
	CATCH(COOKIE_WORD)
	MOVD	p+0(FP), R0
	MOVWU	(R0), R1
	LOAD_FENCE
	UNCATCH
	MOVW	R1, v+8(FP)
	MOVD	ZR, fault+16(FP)
	RET

// func load64(p *uint64) (v uint64, fault uintptr)
TEXT ·load64(SB), NOSPLIT, $0-24
	CATCH(COOKIE_WORD)
	MOVD	p+0(FP), R0
	MOVD	(R0), R1
	LOAD_FENCE
	UNCATCH
	MOVD	R1, v+8(FP)
	MOVD	ZR, fault+16(FP)
	RET
