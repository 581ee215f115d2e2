//go:build !linux

package hostfs

// sub opens the directory name below t as a confined os.Root.
func (t dirTree) sub(name string) (tree, error) {
	r, err := t.r.OpenRoot(name)
	if err != nil {
		return nil, err
	}
	return dirTree{r: r}, nil
}
