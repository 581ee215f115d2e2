package main

import (
	"fmt"

	"slices"

	"github.com/p2pkit/p2pkit/nccl"
)

// maxLogHosts bounds the hosts whose printed topology --log predicts for.
const maxLogHosts = 64

// runLog explains NCCL logs, compared with the prediction for --topo-file or for
// the topology each host printed.
func (no *ncclOptions) runLog(assume map[string]string, ver nccl.Version, verSrc string) error {
	o := no.global
	if n := count(no.logs, "-"); n > 1 {
		return usageError("--log -: standard input can be read once")
	}
	var srcs []nccl.LogSource
	for _, name := range no.logs {
		f, err := o.openInput(name, kindNCCLLog)
		if err != nil {
			return noEvalError(err)
		}
		defer f.Close()
		srcs = append(srcs, nccl.LogSource{Name: name, R: f})
	}
	l, err := nccl.ParseLogs(srcs)
	if err != nil {
		return noEvalError(err)
	}
	switch {
	case verSrc != "":
	case !l.Version.IsZero():
		ver, verSrc = l.Version, "the log"
	default:
		ver, verSrc = nccl.DefaultVersion, "default: the log printed no NCCL version line (--nccl-version to choose)"
	}
	preds, topology, notes, err := no.logPredictions(l, assume, ver, verSrc)
	if err != nil {
		return err
	}
	r := nccl.ExplainLog(l, ver, verSrc, topology, preds)
	r.Logs = slices.Clone(no.logs)
	r.Notes = append(r.Notes, notes...)
	if o.format == "json" {
		return r.WriteJSON(o.stdout)
	}
	w := &lineEscaper{w: o.stdout}
	if err := r.WriteText(w); err != nil {
		return err
	}
	return w.Close()
}

func count(ss []string, s string) int {
	n := 0
	for _, x := range ss {
		if x == s {
			n++
		}
	}
	return n
}

// logPredictions predicts for --topo-file, taken as the host of the lowest rank
// (NCCL_TOPO_DUMP_FILE is rank 0's by default), or else for each host whose
// topology the log printed.
func (no *ncclOptions) logPredictions(l *nccl.Log, assume map[string]string, ver nccl.Version, verSrc string) ([]nccl.Prediction, string, []string, error) {
	hosts := l.Hosts()
	if no.topoFile != "" {
		root, err := no.global.readTopoFile(no.topoFile)
		if err != nil {
			return nil, "", nil, err
		}
		plugin := no.netPlugin
		if plugin == "" {
			plugin = l.Plugin
		}
		r, err := nccl.Predict(nccl.FileInput(root, plugin, nccl.LogSettings(l, assume), ver, verSrc))
		if err != nil {
			return nil, "", nil, noEvalError(fmt.Errorf("%s: %w", no.topoFile, err))
		}
		host := "the log's host"
		if len(hosts) > 0 {
			host = hosts[0]
		}
		return []nccl.Prediction{{Host: host, Report: r}}, "--topo-file " + no.topoFile + ", taken as " + host + ", under the settings the log printed", nil, nil
	}
	var preds []nccl.Prediction
	var notes, on []string
	for _, h := range hosts {
		if len(preds) == maxLogHosts {
			notes = append(notes, fmt.Sprintf("only the first %d hosts' topologies are predicted for", maxLogHosts))
			break
		}
		if _, ok := l.Systems[h]; !ok {
			continue
		}
		in, err := nccl.LogInput(l, h, assume, ver, verSrc)
		if err == nil {
			var r *nccl.Report
			if r, err = nccl.Predict(in); err == nil {
				preds = append(preds, nccl.Prediction{Host: h, Report: r})
				on = append(on, h)
				continue
			}
		}
		notes = append(notes, fmt.Sprintf("the topology NCCL printed on %s could not be read back: %v", h, err))
	}
	if len(preds) == 0 {
		return nil, "none: the log printed no topology p2pcheck could read (NCCL_DEBUG_SUBSYS=GRAPH prints it; --topo-file gives one)", notes, nil
	}
	return preds, fmt.Sprintf("the topology NCCL printed on %v, under the settings the log printed", on), notes, nil
}
