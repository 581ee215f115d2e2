package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// The peer protocol of apiperf --copies, version 1: gdrbench starts the
// peer command and speaks to it in lines of text on its standard input and
// output.
//
//	peer:     gdrbench-peer 1 <what it measures>
//	gdrbench: to <size> <iters>      (or: from <size> <iters>)
//	peer:     <nanoseconds>          (or: error <reason>)
//	...
//	gdrbench: quit
//
// For each request the peer takes a device-side buffer of size bytes in a
// shared mapping of a memfd and a host-side one that begins hostOffset
// bytes past a page boundary, writes every byte of both with ordinary
// stores, copies once untimed, and then times iters copies back to back
// (to: host to device side; from: device side to host) and answers the
// elapsed time of the iters in nanoseconds. Started with cpuEnv=N in its
// environment, the peer times its copies on CPU N only and ends its
// greeting with "on CPU N" (apiperf's help says the same for users).
const (
	peerGreeting = "gdrbench-peer 1 "
	peerMaxLine  = 512
)

// How long gdrbench waits for the peer's greeting or its exit after quit,
// and for one answer; variables so that tests can shorten them.
var (
	peerStartWait  = 10 * time.Second
	peerAnswerWait = time.Minute
)

// peer is a running peer program.
type peer struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan peerLine
	name  string // what the peer said it measures
}

type peerLine struct {
	text string
	err  error
}

// startPeer starts command, a program and its arguments split at spaces,
// with cpuEnv naming cpu in its environment (none where cpu is -1), and
// reads its greeting.
func startPeer(command string, cpu int, stderr io.Writer) (*peer, error) {
	args := strings.Fields(command)
	if len(args) == 0 {
		return nil, errors.New("peer: no command")
	}
	path := args[0]
	cmd := exec.Command(path, args[1:]...)
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, cpuEnv+"=") })
	if cpu >= 0 {
		cmd.Env = append(cmd.Env, cpuEnv+"="+strconv.Itoa(cpu))
	}
	cmd.Stderr = stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("peer: %w", err)
	}
	p := &peer{cmd: cmd, in: in, lines: make(chan peerLine, 1)}
	go readPeerLines(out, p.lines)
	greeting, err := p.line(peerStartWait)
	if err == nil && !strings.HasPrefix(greeting, peerGreeting) {
		err = fmt.Errorf("peer %s: first line %q is not %q and a description: not a gdrbench peer, or of another protocol version",
			path, greeting, strings.TrimSpace(peerGreeting))
	}
	if err != nil {
		return nil, errors.Join(err, p.kill())
	}
	p.name = strings.TrimPrefix(greeting, peerGreeting)
	return p, nil
}

// readPeerLines sends the lines of r, each at most peerMaxLine bytes and
// printable, to lines until the first error, which it sends last.
func readPeerLines(r io.Reader, lines chan<- peerLine) {
	br := bufio.NewReaderSize(r, peerMaxLine)
	for {
		b, err := br.ReadSlice('\n')
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			err = fmt.Errorf("peer: a line longer than %d bytes", peerMaxLine)
		case err == io.EOF:
			err = errors.New("peer: exited, or closed its output")
		}
		if err != nil {
			lines <- peerLine{err: err}
			return
		}
		s := strings.TrimRight(string(b), "\r\n")
		if strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
			lines <- peerLine{err: fmt.Errorf("peer: unprintable line %q", s)}
			return
		}
		lines <- peerLine{text: s}
	}
}

// line returns the peer's next line, waiting at most wait.
func (p *peer) line(wait time.Duration) (string, error) {
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case l := <-p.lines:
		return l.text, l.err
	case <-t.C:
		return "", fmt.Errorf("peer: no answer within %v", wait)
	}
}

// measure asks the peer to time iters copies of size bytes in direction
// dir ("to" or "from") and returns their total time.
func (p *peer) measure(dir string, size, iters int) (time.Duration, error) {
	if _, err := fmt.Fprintf(p.in, "%s %d %d\n", dir, size, iters); err != nil {
		return 0, fmt.Errorf("peer: %w", err)
	}
	answer, err := p.line(peerAnswerWait)
	if err != nil {
		return 0, err
	}
	if reason, ok := strings.CutPrefix(answer, "error "); ok {
		return 0, fmt.Errorf("peer: %s %d x%d: %s", dir, size, iters, reason)
	}
	ns, err := strconv.ParseInt(answer, 10, 64)
	if err != nil || ns <= 0 {
		return 0, fmt.Errorf("peer: %s %d x%d: answer %q is not a positive number of nanoseconds", dir, size, iters, answer)
	}
	return time.Duration(ns), nil
}

// close asks the peer to quit and waits for it, killing it if it does not
// exit within peerStartWait.
func (p *peer) close() error {
	_, _ = io.WriteString(p.in, "quit\n")
	_ = p.in.Close()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	t := time.NewTimer(peerStartWait)
	defer t.Stop()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("peer: %w", err)
		}
		return nil
	case <-t.C:
		err := p.cmd.Process.Kill()
		<-done
		return errors.Join(fmt.Errorf("peer: did not exit within %v of quit", peerStartWait), err)
	}
}

// kill ends a peer that is still starting.
func (p *peer) kill() error {
	_ = p.in.Close()
	err := p.cmd.Process.Kill()
	_ = p.cmd.Wait()
	if errors.Is(err, os.ErrProcessDone) {
		return nil
	}
	return err
}
