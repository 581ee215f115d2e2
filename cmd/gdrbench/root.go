package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/p2pkit/p2pkit/procfs"
)

// globalOptions are the flags every command takes.
type globalOptions struct {
	format string
	device int
	va     string
	root   string

	stdout, stderr io.Writer
}

const rootLong = `gdrbench tests and measures GDRCopy: the CPU copying to and from GPU memory
through a gdrdrv BAR1 mapping. The commands mirror NVIDIA GDRCopy's tools:

  sanity   pin, map, copy and check data          (gdrcopy_sanity)
  copybw   write and read bandwidth                (gdrcopy_copybw)
  copylat  copy latency per size, with cuMemcpy    (gdrcopy_copylat)
  apiperf  pin/map/get_info/unmap/unpin cost       (gdrcopy_apiperf)

Device memory is allocated with the CUDA driver on GPU -d, aligned to 64 KiB,
with CU_POINTER_ATTRIBUTE_SYNC_MEMOPS set. --va uses a device virtual address
range this process can already pin instead (its length is the command's -s).

When gdrdrv is not usable gdrbench prints what is missing and the fix, and exits
2; copylat first measures the cuMemcpy baseline if a GPU is present.

Exit codes: 0 success, 1 a test or benchmark failed (or an internal error), 2 gdrdrv not usable,
3 no GPU to work on, 64 usage error.`

func newRootCommand(stdout, stderr io.Writer) *cobra.Command {
	o := &globalOptions{stdout: stdout, stderr: stderr}
	cmd := &cobra.Command{
		Use:           "gdrbench",
		Short:         "GDRCopy sanity tests and benchmarks",
		Long:          rootLong,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(*cobra.Command, []string) error {
			if o.format != "text" && o.format != "json" {
				return usageError("--format must be text or json, not %q", o.format)
			}
			if o.device < 0 {
				return usageError("-d must be a GPU index, not %d", o.device)
			}
			if _, err := o.vaddr(); err != nil {
				return err
			}
			return nil
		},
	}
	cmd.CompletionOptions.DisableDefaultCmd = true
	pf := cmd.PersistentFlags()
	pf.StringVar(&o.format, "format", "text", "output format: text or json")
	pf.IntVarP(&o.device, "device", "d", 0, "GPU index (CUDA numbering)")
	pf.StringVar(&o.va, "va", "", "use this device virtual address (hex with 0x) instead of a CUDA allocation; it must be 64 KiB aligned")
	pf.StringVar(&o.root, "root", "/", "treat this directory as /: open DIR/dev/gdrdrv and diagnose from DIR/proc and DIR/dev")
	cmd.AddCommand(
		newSanityCommand(o),
		newCopyBWCommand(o),
		newCopyLatCommand(o),
		newAPIPerfCommand(o),
	)
	return cmd
}

// vaddr parses --va; it returns 0 when --va was not given.
func (o *globalOptions) vaddr() (va uint64, err error) {
	if o.va == "" {
		return 0, nil
	}
	v, err := strconv.ParseUint(o.va, 0, 64)
	if err != nil || v == 0 {
		return 0, usageError("--va %q is not a device address", o.va)
	}
	if v%gpuPageSize != 0 {
		return 0, usageError("--va %#x is not 64 KiB aligned; gdrdrv maps only from a GPU page boundary", v)
	}
	return v, nil
}

// diagnoseGDRDrv explains why gdrdrv could not be opened.
func (o *globalOptions) diagnoseGDRDrv(openErr error) readiness {
	fsys, err := procfs.NewFS(o.root)
	if err != nil {
		return readiness{
			OpenError: errString(openErr),
			Problems:  []string{fmt.Sprintf("cannot read %s: %v", o.root, err)},
			Fix:       "run on the machine itself, with /proc and /dev mounted",
		}
	}
	defer fsys.Close()
	return diagnose(fsys, openErr, os.Getuid())
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// report is the JSON document every command writes with --format json.
type report struct {
	// SchemaVersion is schemaVersion, set by writeJSON.
	SchemaVersion string `json:"schema_version"`

	Tool    string       `json:"tool"`
	GPUs    []gpuInfo    `json:"gpus,omitempty"`
	Device  int          `json:"device"`
	VA      string       `json:"va,omitempty"`
	GDRDrv  *readiness   `json:"gdrdrv,omitempty"`
	Mapping *mappingInfo `json:"mapping,omitempty"`
	// Copies describes an apiperf --copies run, whose Results are copyRows.
	Copies  *copiesInfo `json:"copies,omitempty"`
	Results any         `json:"results"`
	// Notes holds the warnings the text output prints, such as a missing
	// baseline.
	Notes []string `json:"notes,omitempty"`
}

func (o *globalOptions) writeJSON(r *report) error {
	r.SchemaVersion = schemaVersion
	enc := json.NewEncoder(o.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
