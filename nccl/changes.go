package nccl

// setting is one "what if": a name and a value; an empty value unsets the name.
type setting struct{ name, value string }

func (c setting) String() string {
	if c.value == "" {
		return "unset " + c.name
	}
	return c.name + "=" + c.value
}

// pairCandidates are the settings that may move a pair to another transport:
// unsetting what is set, and the switches of its own transport.
func pairCandidates(set Settings, p GPUPair) []setting {
	var cands []setting
	for _, n := range []string{"NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL", "NCCL_SHM_DISABLE", "NCCL_P2P_USE_CUDA_MEMCPY", "NCCL_NET_DISABLE_INTRA"} {
		if _, ok := set.Get(n); ok {
			cands = append(cands, setting{n, ""})
		}
	}
	switch p.otherwise().Transport {
	case "P2P":
		cands = append(cands, setting{"NCCL_P2P_DISABLE", "1"}, setting{"NCCL_P2P_USE_CUDA_MEMCPY", "1"})
	case "SHM":
		cands = append(cands, setting{"NCCL_P2P_LEVEL", p.Path.String()}, setting{"NCCL_SHM_DISABLE", "1"})
	case "NET":
		cands = append(cands, setting{"NCCL_P2P_LEVEL", "SYS"}, setting{"NCCL_NET_DISABLE_INTRA", "1"})
	}
	return cands
}

// netCandidates are the settings that may turn GPUDirect RDMA on or off.
func netCandidates(set Settings, gn GPUNet) []setting {
	var cands []setting
	if _, ok := set.Get("NCCL_NET_GDR_LEVEL"); ok {
		cands = append(cands, setting{"NCCL_NET_GDR_LEVEL", ""})
	}
	if gn.otherwise().Recv == "yes" {
		return append(cands, setting{"NCCL_NET_GDR_LEVEL", "LOC"})
	}
	return append(cands, setting{"NCCL_NET_GDR_LEVEL", gn.Path.String()})
}

// changes fills in every decision's Changes: each distinct setting any decision
// tries is evaluated once, on one engine at a time, for all the decisions that
// try it, so the cost is the number of distinct settings (a handful) times one
// path computation, plus one decision per setting a decision tries.
func (p *predictor) changes(r *Report) error {
	set := p.in.Settings
	pairC := make([][]setting, len(r.GPUPairs))
	netC := make([][]setting, len(r.GPUNets))
	var order []setting
	seen := map[setting]bool{}
	add := func(cs []setting) {
		for _, c := range cs {
			if !seen[c] {
				seen[c] = true
				order = append(order, c)
			}
		}
	}
	for i, q := range r.GPUPairs {
		pairC[i] = pairCandidates(set, q)
		add(pairC[i])
	}
	for i, gn := range r.GPUNets {
		netC[i] = netCandidates(set, gn)
		add(netC[i])
	}
	pairOut := make([][]*Change, len(r.GPUPairs))
	netOut := make([][]*Change, len(r.GPUNets))
	for _, c := range order {
		if err := p.tryPairs(c, r, pairC, pairOut); err != nil {
			return err
		}
		if err := p.tryNets(c, r, netC, netOut); err != nil {
			return err
		}
	}
	changes := map[string][]Change{}
	for i := range r.GPUPairs {
		r.GPUPairs[i].Changes = collect(pairOut[i], changes)
	}
	for i := range r.GPUNets {
		r.GPUNets[i].Changes = collect(netOut[i], changes)
	}
	return nil
}

// whatIf is the engine with one setting changed.
func (p *predictor) whatIf(c setting) (*engine, error) {
	set := p.in.Settings.With(c.name, c.value, SourceAssume)
	if c.value == "" {
		set = p.in.Settings.without(c.name)
	}
	return p.engine(source{xml: p.in.Topology, base: true}, set, p.in.Facts)
}

func (s Settings) without(name string) Settings {
	c := s.With(name, "", "")
	delete(c.vars, name)
	return c
}

// tryPairs evaluates setting c for the pairs that try it; out[i] keeps, in the
// order pair i tries its settings, the changes that move it.
func (p *predictor) tryPairs(c setting, r *Report, cands [][]setting, out [][]*Change) error {
	var w *engine
	for i, q := range r.GPUPairs {
		k := index(cands[i], c)
		if k < 0 {
			continue
		}
		if w == nil {
			var err error
			if w, err = p.whatIf(c); err != nil {
				return nil // a setting NCCL would refuse changes nothing shown
			}
		}
		if out[i] == nil {
			out[i] = make([]*Change, len(cands[i]))
		}
		a, b := w.sys.byRank[q.From], w.sys.byRank[q.To]
		if a == nil || b == nil {
			continue
		}
		w.begin()
		alt := w.pair(a, b)
		if alt.Via == q.otherwise().Via {
			continue
		}
		out[i][k] = &Change{Setting: c.String(), Effect: p.str(alt.Transport + " (via " + alt.Via + ")")}
	}
	return nil
}

func (p *predictor) tryNets(c setting, r *Report, cands [][]setting, out [][]*Change) error {
	var w *engine
	for i, gn := range r.GPUNets {
		k := index(cands[i], c)
		if k < 0 {
			continue
		}
		if w == nil {
			var err error
			if w, err = p.whatIf(c); err != nil {
				return nil
			}
		}
		if out[i] == nil {
			out[i] = make([]*Change, len(cands[i]))
		}
		g, net := w.sys.byRank[gn.GPU], netByDev(w.sys, gn.Net)
		if g == nil || net == nil {
			continue
		}
		w.begin()
		alt := w.gpuNet(g, net)
		if base := gn.otherwise(); alt.Recv == base.Recv && alt.Send == base.Send {
			continue
		}
		out[i][k] = &Change{Setting: c.String(), Effect: p.str("GPUDirect RDMA recv " + alt.Recv + ", send " + alt.Send)}
	}
	return nil
}

func index(cs []setting, c setting) int {
	for i, x := range cs {
		if x == c {
			return i
		}
	}
	return -1
}

// collect keeps the changes found, in order, sharing equal lists.
func collect(found []*Change, shared map[string][]Change) []Change {
	var out []Change
	key := ""
	for _, c := range found {
		if c != nil {
			out = append(out, *c)
			key += c.Setting + "\x00" + c.Effect + "\x00"
		}
	}
	if out == nil {
		return []Change{}
	}
	if s, ok := shared[key]; ok {
		return s
	}
	shared[key] = out
	return out
}

// gdrCopy mirrors initGdrCopy (src/init.cc) and ncclGdrInit (src/include/gdrwrap.h).
func gdrCopy(in Input, v Version) GDRCopy {
	enabled := in.Settings.Int("NCCL_GDRCOPY_ENABLE", 0) == 1
	g := GDRCopy{Changes: []Change{}, Rules: cites([]string{ruleInitGdrCopy, ruleGdrCopyLine}, v)}
	switch {
	case !enabled:
		g.Use, g.Why = "no", "NCCL_GDRCOPY_ENABLE is not 1 (NCCL's default is 0)"
		switch {
		case in.Facts.GDRDrv != nil && *in.Facts.GDRDrv:
			g.Changes = append(g.Changes, Change{"NCCL_GDRCOPY_ENABLE=1", "GDRCopy for NCCL's host-side flags (gdrdrv is loaded; libgdrapi 2.1 or later must be installed)"})
		default:
			g.Changes = append(g.Changes, Change{"NCCL_GDRCOPY_ENABLE=1", "GDRCopy once gdrdrv (2.1 or later) is loaded and libgdrapi installed"})
		}
	case in.Facts.GDRDrv == nil:
		g.Use, g.Why = "unknown", "NCCL_GDRCOPY_ENABLE=1, but whether gdrdrv is loaded could not be read"
	case !*in.Facts.GDRDrv:
		g.Use, g.Why = "no", "NCCL_GDRCOPY_ENABLE=1, but gdrdrv is not loaded (no module or no /dev/gdrdrv): NCCL goes on without GDRCopy"
	default:
		g.Use, g.Why = "yes", "NCCL_GDRCOPY_ENABLE=1 and gdrdrv is loaded (libgdrapi.so 2.1 or later must be installed, which p2pcheck cannot see)"
		g.Changes = append(g.Changes, Change{"NCCL_GDRCOPY_ENABLE=0", "no GDRCopy"})
	}
	return g
}
