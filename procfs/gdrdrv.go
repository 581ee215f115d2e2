package procfs

import "strings"

// This file reads /proc/driver/gdrdrv/params, which gdrcopy's gdrdrv module prints
// (src/gdrdrv/gdrdrv.c gdrdrv_proc_params_read).

// GDRDrvParams reads /proc/driver/gdrdrv/params (gdrcopy 2.5 and later).
func (fsys FS) GDRDrvParams() (map[string]string, error) {
	b, err := fsys.r.ReadFile("proc/driver/gdrdrv/params", procLimit)
	if err != nil {
		return nil, err
	}
	return parseKeyValues(b), nil
}

// parseKeyValues parses "key: value" lines such as those of /proc/driver/gdrdrv/params
// (gdrcopy src/gdrdrv/gdrdrv.c gdrdrv_proc_params_read: "Version: 2.5", "Built for
// NVIDIA driver flavor: opensource", "Use persistent mapping: yes", "dbg_enabled: 0").
// Lines without a colon are skipped.
func parseKeyValues(b []byte) map[string]string {
	m := map[string]string{}
	for line := range strings.Lines(string(b)) {
		k, v, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(k) == "" {
			continue
		}
		m[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return m
}
