package main

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/p2pkit/p2pkit/gdrcopy"
	"github.com/p2pkit/p2pkit/internal/cli"
)

// env is what a command works with: the device memory, the open driver and
// the report being built. Fields are nil where the machine lacks the part.
type env struct {
	o   *globalOptions
	rep *report

	// va and size are the device range to pin: the aligned CUDA allocation
	// mem, or --va. va is 0 when there is neither.
	va, size uint64
	mem      *deviceMem
	// noGPU says why there is no device memory when va is 0.
	noGPU error

	// drv is nil when gdrdrv could not be opened; rep.GDRDrv then holds
	// the diagnosis.
	drv *gdrcopy.Driver
}

// setup opens gdrdrv, lists the GPUs and gets size bytes of device memory
// (unless --va gave them). Without gdrdrv it allocates only when the command
// can still use the memory (copylat's cuMemcpy baseline). Failures are
// recorded, not returned: each command decides what it can still do.
func (o *globalOptions) setup(tool string, size uint64, memWithoutGDR bool) *env {
	e := &env{o: o, rep: &report{Tool: tool, Device: o.device, Results: []struct{}{}}, size: size}
	drv, err := gdrcopy.OpenPath(filepath.Join(o.root, "dev", "gdrdrv"))
	if err != nil {
		r := o.diagnoseGDRDrv(err)
		e.rep.GDRDrv = &r
	} else {
		e.drv = drv
	}

	gpus, gpuErr := listGPUs()
	e.rep.GPUs = gpus
	va, _ := o.vaddr() // validated in PersistentPreRunE
	switch {
	case va != 0:
		e.va = va
		e.rep.VA = fmt.Sprintf("%#x", va)
	case gpuErr != nil:
		e.noGPU = gpuErr
	case o.device >= len(gpus):
		e.noGPU = fmt.Errorf("no GPU %d: %d CUDA device(s)", o.device, len(gpus))
	case e.drv == nil && !memWithoutGDR:
		// Nothing would use the memory: the command stops at the diagnosis.
	default:
		mem, err := allocDevice(o.device, size)
		if err != nil {
			e.noGPU = fmt.Errorf("allocating %d bytes on GPU %d: %w", size, o.device, err)
			break
		}
		e.mem, e.va = mem, mem.VA
	}
	return e
}

// close releases everything setup acquired.
func (e *env) close() error {
	var errs []error
	if e.drv != nil {
		errs = append(errs, e.drv.Close())
	}
	if e.mem != nil {
		errs = append(errs, e.mem.Close())
	}
	return errors.Join(errs...)
}

// closeInto is close for a deferred call: a release error becomes the command's
// error unless it already has one.
func (e *env) closeInto(err *error) {
	if cerr := e.close(); *err == nil && cerr != nil {
		*err = failError(cerr)
	}
}

// ready is require for commands that need gdrdrv and device memory: in JSON mode
// the report, diagnosis included, is written before the error is returned.
func (e *env) ready() error {
	err := e.require()
	if err != nil && e.o.format == "json" {
		if werr := e.o.writeJSON(e.rep); werr != nil {
			return werr
		}
	}
	return err
}

// require returns the error to exit with when gdrdrv or device memory is
// missing, having printed the diagnosis in text mode.
func (e *env) require() error {
	if e.drv == nil {
		if e.o.format == "text" {
			e.rep.GDRDrv.writeText(e.o.stderr)
		}
		return cli.Exit(exitNotReady, nil)
	}
	if e.va == 0 {
		return cli.Exit(exitNoGPU, fmt.Errorf("no GPU memory to work on (%v); pass --va to use an existing range", e.noGPU))
	}
	return nil
}

// note records a warning for both output formats.
func (e *env) note(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	e.rep.Notes = append(e.rep.Notes, msg)
	if e.o.format == "text" {
		fmt.Fprintln(e.o.stderr, "gdrbench:", msg)
	}
}

// mappingInfo is what the driver says about the pinned, mapped buffer, the
// info.* lines of gdrcopy_copybw.
type mappingInfo struct {
	DriverVersion string `json:"driver_version"`
	VA            string `json:"va"`
	MappedSize    uint64 `json:"mapped_size"`
	PageSize      uint32 `json:"page_size"`
	Type          string `json:"type"`
	PageOffset    uint64 `json:"page_offset"`
}

// pinMapAll pins [e.va, e.va+e.size) and maps it.
func (e *env) pinMapAll() (*gdrcopy.Buffer, *gdrcopy.Mapping, error) {
	buf, err := e.drv.Pin(e.va, e.size, gdrcopy.PinDefault)
	if err != nil {
		return nil, nil, err
	}
	m, err := buf.Map()
	if err != nil {
		return nil, nil, errors.Join(err, buf.Close())
	}
	return buf, m, nil
}

// pinMap is pinMapAll that also records the buffer info in the report.
func (e *env) pinMap() (*gdrcopy.Buffer, *gdrcopy.Mapping, error) {
	buf, m, err := e.pinMapAll()
	if err != nil {
		return nil, nil, err
	}
	info, err := buf.Info()
	if err != nil {
		return nil, nil, errors.Join(err, buf.Close())
	}
	e.rep.Mapping = &mappingInfo{
		DriverVersion: e.drv.Version().String(),
		VA:            fmt.Sprintf("%#x", info.VA),
		MappedSize:    info.MappedSize,
		PageSize:      info.PageSize,
		Type:          info.Mapping.String(),
		PageOffset:    e.va - info.VA,
	}
	return buf, m, nil
}

// header prints the GPU list and mapping info in text mode.
func (e *env) header() {
	if e.o.format != "text" {
		return
	}
	w := e.o.stdout
	writeGPUs(w, e.rep.GPUs)
	if mi := e.rep.Mapping; mi != nil {
		fmt.Fprintf(w, "gdrdrv version: %s\n", mi.DriverVersion)
		fmt.Fprintf(w, "info.va: %s\n", mi.VA)
		fmt.Fprintf(w, "info.mapped_size: %d\n", mi.MappedSize)
		fmt.Fprintf(w, "info.page_size: %d\n", mi.PageSize)
		fmt.Fprintf(w, "info.mapping_type: %s\n", mi.Type)
		fmt.Fprintf(w, "page offset: %d\n", mi.PageOffset)
	}
}
