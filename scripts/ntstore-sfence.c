// ntstore-sfence.c: one 16-byte streaming store (MOVNTDQ) and SFENCE to the same line of a
// memfd mapping, in batches of 2,000, each batch after a different touch of the buffers
// (gdrbench apiperf --copies writes both buffers with plain stores before each batch), and
// then the same with a plain store (MOVDQU) in place of the streaming one. On write-back
// memory a streaming batch takes either about 1 ns or about 150 ns a copy, depending on the
// line's state, not on the code, and a plain batch about 1 ns: the reason gdrcopy's kernels
// stream whole 64-byte lines only and store the 16 or 32 bytes that fill part of a line
// with plain stores (README, "gdrcopy copies"). On WC and UC memory the two stores are the
// same.
//
//   cc -O2 -msse4.1 -o ntstore-sfence scripts/ntstore-sfence.c && taskset -c 1 ./ntstore-sfence
#define _GNU_SOURCE
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static int64_t now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

__attribute__((noinline)) static void stream16(void *dst, const void *src) {
	_mm_stream_si128((__m128i *)dst, _mm_loadu_si128((const __m128i *)src));
	_mm_sfence();
}

__attribute__((noinline)) static void plain16(void *dst, const void *src) {
	_mm_storeu_si128((__m128i *)dst, _mm_loadu_si128((const __m128i *)src));
	_mm_sfence();
}

__attribute__((noinline)) static void fill(volatile uint64_t *b, uint64_t seed) {
	b[0] = seed, b[1] = ~seed;
}

int main(void) {
	size_t len = 4096;
	int fd = memfd_create("ntstore-sfence", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)len) != 0)
		return perror("memfd"), 1;
	uint8_t *dev = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	void *host = NULL;
	if (dev == MAP_FAILED || posix_memalign(&host, 64, len) != 0)
		return perror("buffers"), 1;
	memset(dev, 1, len);
	memset(host, 1, len);
	static const char *const touches[] = {"both written", "none", "host written", "device written", "both written, device read"};
	static const struct {
		const char *name;
		void (*store16)(void *, const void *);
	} stores[] = {{"streaming", stream16}, {"plain", plain16}};
	for (int k = 0; k < 2; k++) {
		for (int round = 0; round < 3; round++) {
			for (int t = 0; t < 5; t++) {
				if (t == 0 || t == 3 || t == 4)
					fill((uint64_t *)dev, 1);
				if (t == 0 || t == 2 || t == 4)
					fill(host, 2);
				if (t == 4)
					(void)*(volatile uint8_t *)dev;
				stores[k].store16(dev, host);
				enum { iters = 2000 };
				int64_t start = now_ns();
				for (int i = 0; i < iters; i++)
					stores[k].store16(dev, host);
				printf("%-9s round %d, %-26s %6.1f ns a copy\n", stores[k].name, round, touches[t],
				       (double)(now_ns() - start) / iters);
			}
		}
	}
	return 0;
}
