package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/p2pkit/p2pkit/gdrcopy"
	"github.com/p2pkit/p2pkit/internal/cli"
)

type sanityOptions struct {
	size  int
	list  bool
	tests []string
}

// errWaived marks a test that cannot run here, as gdrcopy_sanity's exit
// status 2 does.
var errWaived = errors.New("waived")

func waived(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errWaived, fmt.Sprintf(format, args...))
}

// sanityTest is one check, after gdrcopy_sanity's test of the same name.
type sanityTest struct {
	name string
	what string
	run  func(e *env) error
}

var sanityTests = []sanityTest{
	{"basic", "pin, get info, map and unpin; info matches the pin", testBasic},
	{"basic_unaligned_mapping", "a pin that starts inside a GPU page is refused a mapping", testUnalignedMapping},
	{"data_validation_mapping", "data written through the mapping reads back through it, at odd offsets", testMappingRoundTrip},
	{"data_validation_cumemalloc", "mapping writes are seen by cuMemcpyDtoH, cuMemcpyHtoD by mapping reads", testDataValidation},
	{"invalidation_access_after_free", "after cuMemFree the mapping keeps the data (persistent) or reports invalidation", testAccessAfterFree},
	{"attributes_sanity", "the driver answers GET_ATTR", testAttributes},
}

func newSanityCommand(o *globalOptions) *cobra.Command {
	so := &sanityOptions{}
	cmd := &cobra.Command{
		Use:   "sanity",
		Short: "functional tests of pin, map and copy (gdrcopy_sanity)",
		Long: `sanity runs functional tests of gdrdrv through package gdrcopy, after the
tests of gdrcopy_sanity with the same names, and prints a summary. A test that
cannot run here (no CUDA allocation with --va) is waived. -l lists the tests,
-t runs only the named ones.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if so.list {
				for _, t := range sanityTests {
					fmt.Fprintf(o.stdout, "%s\t%s\n", t.name, t.what)
				}
				return nil
			}
			for _, name := range so.tests {
				if !slices.ContainsFunc(sanityTests, func(t sanityTest) bool { return t.name == name }) {
					return usageError("no test %q; -l lists them", name)
				}
			}
			if so.size < gpuPageSize {
				return usageError("-s must be at least 65536")
			}
			return so.run(o)
		},
	}
	f := cmd.Flags()
	f.IntVarP(&so.size, "size", "s", 256<<10, "buffer size in bytes")
	f.BoolVarP(&so.list, "list", "l", false, "list the tests and exit")
	f.StringSliceVarP(&so.tests, "test", "t", nil, "run only this test (repeatable)")
	return cmd
}

// sanityResult is the outcome of one test.
type sanityResult struct {
	Name   string `json:"name"`
	Status string `json:"status"` // "pass", "fail" or "waived"
	Detail string `json:"detail,omitempty"`
}

func (so *sanityOptions) run(o *globalOptions) (err error) {
	e := o.setup("sanity", uint64(so.size), false)
	defer e.closeInto(&err)
	if err := e.ready(); err != nil {
		return err
	}
	e.header()
	results := []sanityResult{}
	failed := 0
	for _, t := range sanityTests {
		if len(so.tests) > 0 && !slices.Contains(so.tests, t.name) {
			continue
		}
		r := sanityResult{Name: t.name, Status: "pass"}
		if err := t.run(e); errors.Is(err, errWaived) {
			r.Status, r.Detail = "waived", strings.TrimPrefix(err.Error(), "waived: ")
		} else if err != nil {
			r.Status, r.Detail = "fail", err.Error()
			failed++
		}
		results = append(results, r)
		if o.format == "text" {
			line := fmt.Sprintf("%s: %s", r.Name, r.Status)
			if r.Detail != "" {
				line += " (" + r.Detail + ")"
			}
			fmt.Fprintln(o.stdout, line)
		}
	}
	e.rep.Results = results
	if o.format == "json" {
		if err := o.writeJSON(e.rep); err != nil {
			return err
		}
	} else {
		count := func(s string) int {
			return len(slices.DeleteFunc(slices.Clone(results), func(r sanityResult) bool { return r.Status != s }))
		}
		fmt.Fprintf(o.stdout, "Total: %d, Passed: %d, Failed: %d, Waived: %d\n",
			len(results), count("pass"), count("fail"), count("waived"))
	}
	if failed > 0 {
		return cli.Exit(exitFail, nil)
	}
	return nil
}

func testBasic(e *env) error {
	buf, err := e.drv.Pin(e.va, e.size, gdrcopy.PinDefault)
	if err != nil {
		return err
	}
	defer buf.Close()
	info, err := buf.Info()
	if err != nil {
		return err
	}
	wantMapped := (e.size + gpuPageSize - 1) &^ (gpuPageSize - 1)
	if info.VA != e.va || info.MappedSize != wantMapped || info.PageSize != gpuPageSize || info.Mapping != gdrcopy.MappingNone {
		return fmt.Errorf("info before map %+v, want va %#x, mapped size %d, page size %d, not mapped", info, e.va, wantMapped, gpuPageSize)
	}
	m, err := buf.Map()
	if err != nil {
		return err
	}
	if m.Type() == gdrcopy.MappingNone || m.Len() != int(e.size) {
		return fmt.Errorf("mapping type %s, length %d; want a mapping of %d bytes", m.Type(), m.Len(), e.size)
	}
	if err := m.Close(); err != nil {
		return err
	}
	return buf.Close()
}

func testUnalignedMapping(e *env) error {
	// A pin that starts 8 bytes into the first GPU page.
	buf, err := e.drv.Pin(e.va+8, gpuPageSize-8, gdrcopy.PinDefault)
	if err != nil {
		return err
	}
	defer buf.Close()
	m, err := buf.Map()
	if err == nil {
		m.Close()
		return errors.New("mapping an unaligned pin succeeded")
	}
	if !errors.Is(err, gdrcopy.ErrUnaligned) {
		return fmt.Errorf("mapping an unaligned pin: %w, want ErrUnaligned", err)
	}
	return nil
}

// sanityOffsets are the odd offsets gdrcopy_sanity's data validation uses.
var sanityOffsets = []int{0, 1, 2, 3, 4, 5, 6, 7, 11, 129, 1023}

func testMappingRoundTrip(e *env) error {
	buf, m, err := e.pinMapAll()
	if err != nil {
		return err
	}
	defer buf.Close()
	n := min(int(e.size), 4096)
	for _, off := range sanityOffsets {
		want := pattern(n, byte(off))
		if err := m.CopyToDevice(off, want); err != nil {
			return err
		}
		got := make([]byte, n)
		if err := m.CopyFromDevice(got, off); err != nil {
			return err
		}
		if i := firstDiff(got, want); i >= 0 {
			return fmt.Errorf("mapping offset %d: byte %d read back %#x, wrote %#x", off, i, got[i], want[i])
		}
	}
	return nil
}

func testDataValidation(e *env) error {
	if e.mem == nil {
		return waived("needs a CUDA allocation to cross-check")
	}
	buf, m, err := e.pinMapAll()
	if err != nil {
		return err
	}
	defer buf.Close()
	n := min(int(e.size), 64<<10)
	for _, off := range sanityOffsets {
		if off+n > int(e.size) {
			continue
		}
		// CPU stores through the mapping, GPU copy out.
		want := pattern(n, byte(off)^0x5a)
		if err := m.CopyToDevice(off, want); err != nil {
			return err
		}
		got := make([]byte, n)
		if err := e.mem.ctx.MemcpyDtoH(got, e.va+uint64(off)); err != nil {
			return err
		}
		if i := firstDiff(got, want); i >= 0 {
			return fmt.Errorf("offset %d: cuMemcpyDtoH byte %d = %#x after writing %#x through the mapping", off, i, got[i], want[i])
		}
		// GPU copy in, CPU loads through the mapping.
		want = pattern(n, byte(off)^0xa5)
		if err := e.mem.ctx.MemcpyHtoD(e.va+uint64(off), want); err != nil {
			return err
		}
		clear(got)
		if err := m.CopyFromDevice(got, off); err != nil {
			return err
		}
		if i := firstDiff(got, want); i >= 0 {
			return fmt.Errorf("offset %d: mapping byte %d = %#x after cuMemcpyHtoD of %#x", off, i, got[i], want[i])
		}
	}
	return nil
}

func testAccessAfterFree(e *env) error {
	if e.mem == nil {
		return waived("needs a CUDA allocation to free")
	}
	attrs, err := e.drv.Attributes()
	if err != nil {
		return err
	}
	mem, err := allocDevice(e.o.device, gpuPageSize)
	if err != nil {
		return err
	}
	defer mem.Close()
	buf, err := e.drv.Pin(mem.VA, gpuPageSize, gdrcopy.PinDefault)
	if err != nil {
		return err
	}
	defer buf.Close()
	m, err := buf.Map()
	if err != nil {
		return err
	}
	want := pattern(4096, 0x3c)
	if err := m.CopyToDevice(0, want); err != nil {
		return err
	}
	if err := mem.ctx.MemFree(mem.base); err != nil {
		return err
	}
	mem.base = 0 // freed; Close must not free it again
	got := make([]byte, len(want))
	err = m.CopyFromDevice(got, 0)
	inval, ierr := buf.Invalidated()
	if ierr != nil {
		return ierr
	}
	if attrs.PersistentMapping {
		if err != nil || inval {
			return fmt.Errorf("persistent mapping after free: copy error %v, invalidated %v; want old data readable", err, inval)
		}
		if i := firstDiff(got, want); i >= 0 {
			return fmt.Errorf("persistent mapping after free: byte %d = %#x, want %#x", i, got[i], want[i])
		}
		return nil
	}
	if !errors.Is(err, gdrcopy.ErrInvalidated) || !inval {
		return fmt.Errorf("non-persistent mapping after free: copy error %v, invalidated %v; want ErrInvalidated", err, inval)
	}
	return nil
}

func testAttributes(e *env) error {
	_, err := e.drv.Attributes()
	return err
}

// pattern returns n bytes that differ at every offset modulo 251 and with seed.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i%251) ^ seed
	}
	return b
}
