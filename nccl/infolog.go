package nccl

import (
	"bufio"
	"io"
	"regexp"
	"slices"
	"strings"
)

// Log is what an NCCL_DEBUG=INFO log says about the decisions Predict makes.
type Log struct {
	// Version is the release from the "NCCL version 2.28.9+cuda13.0" line.
	Version Version
	// Paths are the path lines (printNodePaths in src/graph/paths.cc) without the
	// prefix and trailing space, in order, each once.
	Paths []string
	// Channels are the transport lines, one per connection.
	Channels []Channel
	// NetGDR maps each network device name to its GPUDirect RDMA support from the
	// "NET/<plugin> : GPU Direct RDMA Enabled|Disabled for HCA <dev> '<name>'" lines
	// (ncclTopoPopulateNics in src/graph/topo.cc).
	NetGDR map[string]bool
	// GDRCopy reports a "GDRCOPY enabled library ..." line (ncclGdrInit).
	GDRCopy bool
	// Settings maps each parameter NCCL reported reading ("NCCL_X set by
	// environment to V", ncclLoadParam in src/misc/param.cc and ncclGetLevel in
	// src/graph/paths.cc; values from configuration files are reported the same way)
	// to its value.
	Settings map[string]string
}

// Channel is one "Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM" line: the sending and
// receiving ranks and what follows "via" (for the network, "[send]" or
// "[receive]" precede it and are dropped).
type Channel struct {
	From, To int
	Via      string
}

var (
	pathLine    = regexp.MustCompile(`^(GPU|NET)/[0-9a-f]{1,2}-[0-9a-f]{1,16} :.*\)$`)
	channelLine = regexp.MustCompile(`^Channel \d+(?:/\d+)? : (\d+)\[\d+\] -> (\d+)\[\d+\] (?:\[(?:send|receive)\] )?via (\S+)`)
	setLine     = regexp.MustCompile(`^(NCCL_[A-Z0-9_]+) set by environment to (.*?)\.?$`)
	gdrLine     = regexp.MustCompile(`^NET/\S+ : GPU Direct RDMA (Enabled|Disabled) for HCA \d+ '([^']*)'`)
)

// maxLogLine bounds one line; longer lines are skipped.
const maxLogLine = 64 << 10

// ParseLog reads NCCL INFO lines, with or without the "host:pid:tid [dev] " prefix
// NCCL puts before "NCCL INFO". Other lines are ignored.
func ParseLog(r io.Reader) (*Log, error) {
	l := &Log{NetGDR: map[string]bool{}, Settings: map[string]string{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxLogLine)
	for sc.Scan() {
		_, line, ok := strings.Cut(sc.Text(), "NCCL INFO ")
		if !ok {
			continue
		}
		line = strings.TrimRight(line, " \r")
		switch {
		case strings.HasPrefix(line, "NCCL version "):
			if v, err := ParseVersion(strings.Fields(line)[2]); err == nil {
				l.Version = v
			}
		case pathLine.MatchString(line):
			if !slices.Contains(l.Paths, line) {
				l.Paths = append(l.Paths, line)
			}
		case strings.HasPrefix(line, "GDRCOPY enabled"):
			l.GDRCopy = true
		default:
			if m := channelLine.FindStringSubmatch(line); m != nil {
				l.Channels = append(l.Channels, Channel{From: atoi(m[1]), To: atoi(m[2]), Via: m[3]})
			} else if m := setLine.FindStringSubmatch(line); m != nil {
				l.Settings[m[1]] = m[2]
			} else if m := gdrLine.FindStringSubmatch(line); m != nil {
				l.NetGDR[m[2]] = m[1] == "Enabled"
			}
		}
	}
	if err := sc.Err(); err != nil && err != bufio.ErrTooLong {
		return nil, err
	}
	return l, nil
}
