package vmtest

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
)

// File is one member of an initramfs.
type File struct {
	Name string      // path inside the archive, without a leading slash ("bin/busybox")
	Mode fs.FileMode // permission bits plus fs.ModeDir or fs.ModeSymlink
	Data []byte      // contents of a regular file; the target of a symlink
}

// newc mode bits (the cpio "new ASCII" format of the kernel's
// Documentation/driver-api/early-userspace/buffer-format.rst).
const (
	newcDir     = 0o040000
	newcRegular = 0o100000
	newcSymlink = 0o120000
)

// WriteInitramfs writes files as a gzip-compressed newc cpio archive, the format the
// kernel unpacks into its rootfs at boot (init/initramfs.c). Parent directories that
// files does not list are added (mode 0755), and members are written parents first.
func WriteInitramfs(w io.Writer, files []File) error {
	all := map[string]File{}
	for _, f := range files {
		name := strings.Trim(path.Clean("/"+f.Name), "/")
		if name == "" {
			return fmt.Errorf("vmtest: initramfs member with empty name")
		}
		if _, dup := all[name]; dup {
			return fmt.Errorf("vmtest: initramfs member %q given twice", name)
		}
		f.Name = name
		all[name] = f
		for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
			if _, ok := all[dir]; !ok {
				all[dir] = File{Name: dir, Mode: fs.ModeDir | 0o755}
			}
		}
	}
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	sort.Strings(names) // "a" sorts before "a/b": parents first

	zw := gzip.NewWriter(w)
	bw := bufio.NewWriter(zw)
	for i, n := range names {
		writeNewc(bw, uint32(i+1), all[n])
	}
	writeNewc(bw, 0, File{Name: "TRAILER!!!"})
	// bufio keeps the first write error; Flush reports it.
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("vmtest: write initramfs: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("vmtest: write initramfs: %w", err)
	}
	return nil
}

// writeNewc writes one header, name and body, each padded to four bytes.
func writeNewc(w *bufio.Writer, ino uint32, f File) {
	mode := uint32(f.Mode.Perm())
	switch {
	case f.Mode&fs.ModeDir != 0:
		mode |= newcDir
	case f.Mode&fs.ModeSymlink != 0:
		mode |= newcSymlink
	case f.Name != "TRAILER!!!":
		mode |= newcRegular
	}
	body := f.Data
	if f.Mode&fs.ModeDir != 0 {
		body = nil
	}
	nlink := 1
	if f.Mode&fs.ModeDir != 0 {
		nlink = 2
	}
	// magic, ino, mode, uid, gid, nlink, mtime, filesize, devmajor, devminor,
	// rdevmajor, rdevminor, namesize (with NUL), check.
	hdr := fmt.Sprintf("070701%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x",
		ino, mode, 0, 0, nlink, 0, len(body), 0, 0, 0, 0, len(f.Name)+1, 0)
	w.WriteString(hdr)
	w.WriteString(f.Name)
	w.WriteByte(0)
	pad(w, len(hdr)+len(f.Name)+1)
	w.Write(body)
	pad(w, len(body))
}

func pad(w *bufio.Writer, n int) {
	for ; n%4 != 0; n++ {
		w.WriteByte(0)
	}
}
