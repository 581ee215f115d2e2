// Package rusage measures a command as a whole process for the benchmark tools
// (hostilebench, scalebench, topobench): its exit code, wall and CPU time, peak RSS
// and the bytes it writes to stdout. It also holds the figures those tools and
// benchtable share: medians, the load average, counts as the README writes them.
//
// The command runs below a fresh copy of the calling program, started in launcher
// mode, which reports its child's getrusage: a Go parent starts children with vfork
// semantics, and Linux counts the parent's resident memory at exec time in the
// child's ru_maxrss (fs/exec.c exec_mmap, setmax_mm_hiwater_rss), so a large parent
// (a tool holding its inputs) would make every command look at least as large.
package rusage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// launchEnv, when set, makes the program run the command in its arguments and print
// its Usage; the value is the timeout in seconds.
const launchEnv = "P2PKIT_RUSAGE_LAUNCH"

// Usage is what a command took.
type Usage struct {
	Code     int     `json:"code"`      // exit code, -1 when killed
	Wall     float64 `json:"wall_s"`    // seconds
	CPU      float64 `json:"cpu_s"`     // user and system seconds
	MaxRSS   int64   `json:"max_rss"`   // bytes
	Out      int64   `json:"out"`       // bytes written to stdout
	TimedOut bool    `json:"timed_out"` // killed at the timeout
}

// Serve runs the program as a launcher when Measure started it so: it runs the
// command in its arguments, prints its Usage as JSON and exits. Otherwise it returns
// at once. Call it first in main.
func Serve() {
	v := os.Getenv(launchEnv)
	if v == "" {
		return
	}
	secs, err := strconv.ParseFloat(v, 64)
	if err != nil || len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "rusage: bad launcher call")
		os.Exit(2)
	}
	u, err := launch(os.Args[1:], time.Duration(secs*float64(time.Second)))
	if err != nil {
		fmt.Fprintln(os.Stderr, "rusage:", err)
		os.Exit(2)
	}
	b, _ := json.Marshal(u)
	fmt.Println(string(b))
	os.Exit(0)
}

// Measure runs args (the program first) below a fresh copy of this program, which
// must call Serve, stops it after timeout, and returns what it took. The command
// runs in this program's environment with env (KEY=VALUE) added; its stdout is
// counted and dropped, its stderr dropped.
func Measure(args []string, timeout time.Duration, env ...string) (Usage, error) {
	self, err := os.Executable()
	if err != nil {
		return Usage{}, err
	}
	cmd := exec.Command(self, args...)
	cmd.Env = append(append(os.Environ(), env...), launchEnv+"="+strconv.FormatFloat(timeout.Seconds(), 'f', -1, 64))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return Usage{}, fmt.Errorf("launcher: %w", err)
	}
	var u Usage
	if err := json.Unmarshal(out, &u); err != nil {
		return Usage{}, fmt.Errorf("launcher said %q: %w", out, err)
	}
	return u, nil
}

// launch runs args, counting its output, until it ends or timeout passes.
func launch(args []string, timeout time.Duration) (Usage, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	// The command is not a launcher, even where it is this program too.
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, launchEnv+"=") })
	var out countWriter
	cmd.Stdout = &out // and stderr is dropped
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return Usage{}, err
	}
	u := Usage{Code: cmd.ProcessState.ExitCode(), Wall: wall.Seconds(), Out: int64(out), TimedOut: ctx.Err() != nil}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		u.MaxRSS = ru.Maxrss << 10 // kilobytes on Linux
		u.CPU = time.Duration(syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime)).Seconds()
	}
	return u, nil
}

// countWriter counts the bytes written to it and keeps none.
type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) {
	*c += countWriter(len(p))
	return len(p), nil
}
