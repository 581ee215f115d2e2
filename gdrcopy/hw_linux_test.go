//go:build linux

package gdrcopy

// Tests against a real gdrdrv. They skip with the reason where there is no
// gdrdrv or no device memory, and fail instead under P2PKIT_REQUIRE_HW=1.
//
// Device memory comes from CUDA (hw_cuda_linux_test.go, built with cgo)
// when a GPU is present, or from P2PKIT_GDR_TEST_VA and
// P2PKIT_GDR_TEST_SIZE on rigs whose gdrdrv is backed by something else; a
// static test binary (CGO_ENABLED=0 go test -c) takes the second route.

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/p2pkit/p2pkit/gdrcopy/internal/gdrdrv"
)

const (
	requireHWEnv = "P2PKIT_REQUIRE_HW"
	testVAEnv    = "P2PKIT_GDR_TEST_VA"
	testSizeEnv  = "P2PKIT_GDR_TEST_SIZE"
)

// skipOrFail skips the test, or fails it when P2PKIT_REQUIRE_HW=1.
func skipOrFail(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv(requireHWEnv) == "1" {
		t.Fatalf(requireHWEnv+"=1: "+format, args...)
	}
	t.Skipf(format, args...)
}

// devMem is device memory for a real-device test.
type devMem struct {
	ptr, size uint64
	// free frees the memory (cuMemFree); nil where the test cannot.
	free func() error
	// read copies device memory to the host without the mapping
	// (cuMemcpyDtoH); nil where the test cannot.
	read func(dst []byte, src uint64) error
}

// cudaAlloc allocates device memory through CUDA. hw_cuda_linux_test.go
// sets it in builds with cgo.
var cudaAlloc func(t *testing.T, size uint64) (devMem, error)

// openHW opens the real gdrdrv, or skips.
func openHW(t *testing.T) *Driver {
	t.Helper()
	d, err := Open()
	if err != nil {
		skipOrFail(t, "no usable gdrdrv: %v", err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("close driver: %v", err)
		}
	})
	return d
}

// hwMemory returns size bytes of 64 KiB aligned device memory, or skips.
func hwMemory(t *testing.T, size uint64) devMem {
	t.Helper()
	if s := os.Getenv(testVAEnv); s != "" {
		va, err := strconv.ParseUint(s, 0, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", testVAEnv, s, err)
		}
		n, err := strconv.ParseUint(os.Getenv(testSizeEnv), 0, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", testSizeEnv, os.Getenv(testSizeEnv), err)
		}
		aligned := (va + gdrdrv.GPUPageOffset) & gdrdrv.GPUPageMask
		if aligned-va > n || n-(aligned-va) < size {
			skipOrFail(t, "%s/%s give %d bytes at %#x; the test needs %d from a 64 KiB boundary", testVAEnv, testSizeEnv, n, va, size)
		}
		return devMem{ptr: aligned, size: size}
	}
	if cudaAlloc == nil {
		skipOrFail(t, "no device memory: set %s and %s, or build with cgo on a machine with a CUDA GPU", testVAEnv, testSizeEnv)
	}
	m, err := cudaAlloc(t, size)
	if err != nil {
		skipOrFail(t, "no CUDA device memory: %v", err)
	}
	return m
}

func TestHWPinMapCopy(t *testing.T) {
	const size = 256<<10 + 16
	d := openHW(t)
	mem := hwMemory(t, size)
	b, err := d.Pin(mem.ptr, size, PinDefault)
	if err != nil {
		t.Fatalf("pin: %v", err)
	}
	info, err := b.Info()
	if err != nil {
		t.Fatal(err)
	}
	if info.VA != mem.ptr || info.MappedSize != 320<<10 || info.PageSize != 65536 {
		t.Errorf("Info() = %+v, want VA %#x, MappedSize %d, PageSize 65536", info, mem.ptr, 320<<10)
	}
	m, err := b.Map()
	if err != nil {
		t.Fatalf("map: %v", err)
	}
	t.Logf("gdrdrv %s, mapping type %s", d.Version(), m.Type())
	want := make([]byte, size)
	for i := range want {
		want[i] = byte(i*7 + 3)
	}
	if err := m.CopyToDevice(0, want); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, size)
	if err := m.CopyFromDevice(got, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("read back through the mapping differs from what was written")
	}
	if mem.read != nil {
		clear(got)
		if err := mem.read(got, mem.ptr); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Error("device memory read by CUDA differs from what was written through the mapping")
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}

// invalidation_access_after_free_* on a real driver: what freeing does
// depends on the driver's persistent mode.
func TestHWInvalidationAfterFree(t *testing.T) {
	const size = 64 << 10
	d := openHW(t)
	attrs, err := d.Attributes()
	if err != nil {
		t.Fatal(err)
	}
	mem := hwMemory(t, size)
	if mem.free == nil {
		skipOrFail(t, "the test cannot free device memory given by %s", testVAEnv)
	}
	b, err := d.Pin(mem.ptr, size, PinDefault)
	if err != nil {
		t.Fatal(err)
	}
	m, err := b.Map()
	if err != nil {
		t.Fatal(err)
	}
	if err := m.CopyToDevice(0, le32(42)); err != nil {
		t.Fatal(err)
	}
	if err := mem.free(); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4)
	err = m.CopyFromDevice(got, 0)
	inv, ierr := b.Invalidated()
	if ierr != nil {
		t.Fatal(ierr)
	}
	if attrs.PersistentMapping {
		if err != nil || inv || !bytes.Equal(got, le32(42)) {
			t.Errorf("persistent mode, after free: read %v, err %v, invalidated %t; want the old data", got, err, inv)
		}
	} else if !errors.Is(err, ErrInvalidated) || !inv {
		t.Errorf("non-persistent mode, after free: err %v, invalidated %t; want ErrInvalidated", err, inv)
	}
}

// invalidation_fork_child_gdr_map_parent_* and the descriptor a forked
// child inherits: Go cannot fork without exec, so the child is this test
// binary started with the parent's descriptor, which is what fork leaves a
// child; gdrdrv refuses it all the same, by thread group.
func TestHWForeignProcessInherited(t *testing.T) {
	d := openHW(t)
	handle := pinForChild(t, d)
	dup, err := syscall.Dup(d.dev.FD)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(dup), "gdrdrv")
	defer f.Close()
	runChildProcess(t, "inherit", handle, f)
}

// invalidation_unix_sock_shared_fd_*: a descriptor received over
// SCM_RIGHTS is refused.
func TestHWForeignProcessSCMRights(t *testing.T) {
	d := openHW(t)
	handle := pinForChild(t, d)
	pair, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	ours := os.NewFile(uintptr(pair[0]), "parent end")
	theirs := os.NewFile(uintptr(pair[1]), "child end")
	defer ours.Close()
	defer theirs.Close()
	if err := syscall.Sendmsg(pair[0], []byte{0}, syscall.UnixRights(d.dev.FD), nil, 0); err != nil {
		t.Fatal(err)
	}
	runChildProcess(t, "scm", handle, theirs)
}

// pinForChild pins device memory for a child to try to map.
func pinForChild(t *testing.T, d *Driver) uint64 {
	t.Helper()
	mem := hwMemory(t, 64<<10)
	b, err := d.Pin(mem.ptr, mem.size, PinDefault)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b.handle
}

// runChildProcess runs this test binary in role with f as descriptor 3 and
// fails the test unless the child reports that gdrdrv refused it.
func runChildProcess(t *testing.T, role string, handle uint64, f *os.File) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childRoleEnv+"="+role, childHandleEnv+"="+strconv.FormatUint(handle, 10))
	cmd.ExtraFiles = []*os.File{f}
	out, err := cmd.CombinedOutput()
	t.Logf("child (%s):\n%s", role, out)
	if err != nil {
		t.Errorf("child (%s): %v", role, err)
	}
}

const (
	childRoleEnv   = "P2PKIT_GDRCOPY_TEST_CHILD"
	childHandleEnv = "P2PKIT_GDRCOPY_TEST_HANDLE"
)

// runChild is the child side of the foreign-process tests: descriptor 3 is
// the parent's gdrdrv descriptor ("inherit") or a socket that carries it
// ("scm"). Every use of it must fail with ErrForeignProcess. It returns the
// exit code.
func runChild(role string) int {
	fd := 3
	if role == "scm" {
		buf, oob := make([]byte, 1), make([]byte, syscall.CmsgSpace(4))
		_, oobn, _, _, err := syscall.Recvmsg(3, buf, oob, 0)
		if err != nil {
			fmt.Println("recvmsg:", err)
			return 2
		}
		fd, err = receivedFD(oob[:oobn])
		if err != nil {
			fmt.Println(err)
			return 2
		}
	} else if role != "inherit" {
		fmt.Println("unknown role", role)
		return 2
	}
	handle, err := strconv.ParseUint(os.Getenv(childHandleEnv), 10, 64)
	if err != nil {
		fmt.Println("handle:", err)
		return 2
	}
	dev := gdrdrv.Dev{Sys: gdrdrv.Host, FD: fd}
	var problems []string
	var v gdrdrv.GetVersionParams
	if err := dev.GetVersion(&v); !errors.Is(driverError("get version", err), ErrForeignProcess) {
		problems = append(problems, fmt.Sprintf("GET_VERSION: %v, want EACCES", err))
	}
	cb := gdrdrv.GetCBFlagParams{Handle: handle}
	if err := dev.GetCBFlag(&cb); !errors.Is(driverError("get callback flag", err), ErrForeignProcess) {
		problems = append(problems, fmt.Sprintf("GET_CB_FLAG: %v, want EACCES", err))
	}
	mem, err := dev.MmapHandle(handle, os.Getpagesize())
	if err == nil {
		_ = dev.Sys.Munmap(mem)
	}
	if !errors.Is(driverError("mmap", err), ErrForeignProcess) {
		problems = append(problems, fmt.Sprintf("mmap: %v, want EACCES", err))
	}
	if len(problems) > 0 {
		fmt.Println(strings.Join(problems, "\n"))
		return 1
	}
	fmt.Println("gdrdrv refused the foreign process, as it should")
	return 0
}

func receivedFD(oob []byte) (int, error) {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil || len(msgs) != 1 {
		return -1, fmt.Errorf("control message: %d messages, %v", len(msgs), err)
	}
	fds, err := syscall.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		return -1, fmt.Errorf("unix rights: %v, %v", fds, err)
	}
	return fds[0], nil
}
