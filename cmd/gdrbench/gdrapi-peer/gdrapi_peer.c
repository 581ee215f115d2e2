// gdrapi_peer is the libgdrapi side of `gdrbench apiperf --copies --peer`: it
// answers the peer protocol of `gdrbench apiperf --help` with the copies of
// gdrcopy's own library, gdr_copy_to_mapping and gdr_copy_from_mapping, on
// write-back host memory, so that gdrbench can time its copies and libgdrapi's
// in the same rounds.
//
// It is built against a gdrcopy source tree that the user points to
// (scripts/build-gdrapi-peer.sh; nothing of gdrcopy is kept in this
// repository): this file includes that tree's src/gdrapi.c, unchanged, and is
// linked with its src/memcpy_*.c, each compiled with the flags of gdrcopy's
// src/Makefile. Including the library's source is what lets it run without
// gdrdrv or a GPU: gdr_open, which sets the library's CPU feature flags
// (gdr_init_cpu_flags) and so picks its SSE/AVX/MOVDIR64B copy routines, fails
// before that without /dev/gdrdrv or CUDA, and a handle (gdr_mh_t) is made only
// by gdr_map. So the peer calls gdr_init_cpu_flags itself and hands the copies
// a handle whose mapping type is write-combining (GDR_MAPPING_TYPE_WC), the
// type gdr_map gives a BAR1 mapping, which selects the same code path.
//
// Each request's buffers are a shared mapping of a memfd (the "device" side,
// as gdrbench's own is) and a host buffer that begins 64 bytes past a page
// boundary, where gdrbench's own begins (its hostOffset). Both are written
// with ordinary 8-byte stores, front to back; one copy runs untimed, then
// iters copies back to back are timed with CLOCK_MONOTONIC, and the copied
// bytes are compared with their source: a copy that loses a byte answers
// "error", not a time. With GDRBENCH_CPU=N in its environment (gdrbench
// --cpu N sets it) the peer runs on CPU N only, and its greeting says so.
#define _GNU_SOURCE
#include "gdrapi.c"

#include <ctype.h>
#include <inttypes.h>
#include <sched.h>
#include <sys/mman.h>

enum { max_line = 512 };

enum { host_offset = 64 }; // where in its page the host buffer begins

static uint8_t *dev, *host; // the buffers, grown to the largest size asked
static void *host_block;    // the allocation host lies in
static size_t capacity;

// grow makes both buffers hold at least size bytes.
static int grow(size_t size) {
	if (size <= capacity)
		return 0;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t len = (size + page - 1) / page * page;
	if (dev != NULL)
		munmap(dev, capacity);
	free(host_block);
	dev = NULL, host = NULL, host_block = NULL, capacity = 0;
	int fd = memfd_create("gdrapi-peer", MFD_CLOEXEC);
	if (fd < 0)
		return -1;
	if (ftruncate(fd, (off_t)len) != 0) {
		close(fd);
		return -1;
	}
	void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return -1;
	void *h = NULL;
	if (posix_memalign(&h, page, len + host_offset) != 0) {
		munmap(m, len);
		return -1;
	}
	dev = m, host = (uint8_t *)h + host_offset, host_block = h, capacity = len;
	return 0;
}

// fill writes every byte of b with ordinary stores of 8-byte words from the
// start, as the protocol asks (no memset, which may stream); the words are
// gdrbench's own pattern, which no compiler can turn into a constant fill.
static void fill(uint8_t *b, size_t n, uint64_t seed) {
	size_t words = n / 8;
	for (size_t i = 0; i < words; i++) {
		uint64_t w = (uint64_t)i * 0x9e3779b97f4a7c15ull ^ seed;
		memcpy(b + 8 * i, &w, 8);
	}
	for (size_t i = words * 8; i < n; i++)
		b[i] = (uint8_t)seed;
}

static int64_t now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static const char *name(const char *s) { return s != NULL ? s : "-"; }

// pin runs the process on the CPU that GDRBENCH_CPU names, if it is set and
// not empty, and returns that CPU; -1 where it is unset, -2 on an error,
// which it prints to standard error.
static int pin(void) {
	const char *v = getenv("GDRBENCH_CPU");
	if (v == NULL || *v == '\0')
		return -1;
	char *end;
	errno = 0;
	long cpu = strtol(v, &end, 10);
	if (!isdigit((unsigned char)*v) || errno != 0 || *end != '\0' || cpu >= CPU_SETSIZE) {
		fprintf(stderr, "gdrapi-peer: GDRBENCH_CPU=%s is not a CPU number\n", v);
		return -2;
	}
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET((int)cpu, &set);
	if (sched_setaffinity(0, sizeof set, &set) != 0) {
		fprintf(stderr, "gdrapi-peer: run on CPU %ld: sched_setaffinity: %s\n", cpu, strerror(errno));
		return -2;
	}
	return (int)cpu;
}

int main(void) {
	int cpu = pin();
	if (cpu == -2)
		return 1;
	gdr_init_cpu_flags();
	gdr_memh_t mh = {.mapping_type = GDR_MAPPING_TYPE_WC};
	gdr_mh_t handle = from_memh(&mh);
	printf("gdrbench-peer 1 libgdrapi %d.%d gdr_copy_to_mapping/gdr_copy_from_mapping "
	       "(store %s/%s/%s load %s/%s/%s), "
#if defined(__clang__)
	       "clang "
#elif defined(__GNUC__)
	       "gcc "
#endif
	       "%s",
	       GDR_API_MAJOR_VERSION, GDR_API_MINOR_VERSION,
	       name(memcpy_uncached_store_16B_name), name(memcpy_uncached_store_32B_name),
	       name(memcpy_uncached_store_64B_name), name(memcpy_uncached_load_16B_name),
	       name(memcpy_uncached_load_32B_name), name(memcpy_uncached_load_64B_name), __VERSION__);
	if (cpu >= 0)
		printf(" on CPU %d", cpu);
	printf("\n");
	fflush(stdout);

	char line[max_line];
	while (fgets(line, sizeof line, stdin) != NULL) {
		char dir[8];
		long long size, iters;
		char extra;
		if (strcmp(line, "quit\n") == 0 || strcmp(line, "quit") == 0)
			return 0;
		if (sscanf(line, "%7s %lld %lld %c", dir, &size, &iters, &extra) != 3 ||
		    (strcmp(dir, "to") != 0 && strcmp(dir, "from") != 0)) {
			printf("error not a request: want to|from <size> <iters>\n");
		} else if (size < 1 || size > (1ll << 34) || iters < 1) {
			printf("error size must be 1 to 16 GiB and iters positive\n");
		} else if (grow((size_t)size) != 0) {
			printf("error buffers of %lld bytes: %s\n", size, strerror(errno));
		} else {
			size_t n = (size_t)size;
			int to = strcmp(dir, "to") == 0;
			fill(dev, n, 1);
			fill(host, n, 2);
			int rc = to ? gdr_copy_to_mapping(handle, dev, host, n)
				    : gdr_copy_from_mapping(handle, host, dev, n);
			int64_t start = now_ns();
			for (long long i = 0; i < iters && rc == 0; i++)
				rc = to ? gdr_copy_to_mapping(handle, dev, host, n)
					: gdr_copy_from_mapping(handle, host, dev, n);
			int64_t ns = now_ns() - start;
			if (rc != 0)
				printf("error gdr_copy_%s_mapping: %s\n", to ? "to" : "from", strerror(rc));
			else if (memcmp(dev, host, n) != 0)
				printf("error gdr_copy_%s_mapping: the copy differs from its source\n", to ? "to" : "from");
			else
				printf("%" PRId64 "\n", ns > 0 ? ns : 1);
		}
		fflush(stdout);
	}
	return 0;
}
