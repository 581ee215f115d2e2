// Command p2pcheck-image builds p2pcheck's container image without a
// container daemon, and unpacks it again to check what it holds:
//
//	p2pcheck-image build -o p2pcheck-image.oci.tar -version v0.3.0 -revision $(git rev-parse HEAD) \
//	    -created $(git log -1 --format=%ct) \
//	    -pci-ids /usr/share/misc/pci.ids amd64=dist/linux_amd64/p2pcheck arm64=dist/linux_arm64/p2pcheck
//	p2pcheck-image unpack -i p2pcheck-image.oci.tar -arch amd64 -o rootfs
//
// -created is the image's creation time in seconds since the Unix epoch (the
// commit's time, so that builds are reproducible); it defaults to
// SOURCE_DATE_EPOCH (https://reproducible-builds.org/specs/source-date-epoch/).
//
// The archive is an OCI image layout in a tar: push both platforms with
// "skopeo copy --all --preserve-digests oci-archive:p2pcheck-image.oci.tar:v0.3.0 docker://ghcr.io/p2pkit/p2pcheck:v0.3.0".
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/p2pkit/p2pkit/deploy/image"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(64)
		}
		fmt.Fprintln(os.Stderr, "p2pcheck-image:", err)
		os.Exit(1)
	}
}

const usage = `usage: p2pcheck-image build -o FILE -version vX.Y.Z [-revision COMMIT] [-created SECONDS] [-repository R] -pci-ids FILE ARCH=BINARY...
       p2pcheck-image unpack -i FILE -arch ARCH -o DIR`

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return flag.ErrHelp
	}
	fl := flag.NewFlagSet("p2pcheck-image "+args[0], flag.ContinueOnError)
	fl.SetOutput(stderr)
	switch args[0] {
	case "build":
		out := fl.String("o", "", "the image archive to write")
		o := image.Options{}
		fl.StringVar(&o.Version, "version", "", "the release, the image's tag")
		fl.StringVar(&o.Repository, "repository", "ghcr.io/p2pkit/p2pcheck", "the image's repository")
		fl.StringVar(&o.PCIIDs, "pci-ids", "/usr/share/misc/pci.ids", "the pci.ids file to ship")
		fl.StringVar(&o.Revision, "revision", "", "the commit the binaries were built from")
		created := fl.String("created", os.Getenv("SOURCE_DATE_EPOCH"), "the creation time, in seconds since the Unix epoch (default $SOURCE_DATE_EPOCH, else 0)")
		if err := fl.Parse(args[1:]); err != nil {
			return err
		}
		if *created != "" {
			sec, err := strconv.ParseInt(*created, 10, 64)
			if err != nil || sec < 0 {
				return fmt.Errorf("-created %q is not a number of seconds since the Unix epoch\n%s", *created, usage)
			}
			o.Created = time.Unix(sec, 0)
		}
		o.Binaries = map[string]string{}
		for _, a := range fl.Args() {
			arch, bin, ok := strings.Cut(a, "=")
			if !ok {
				return fmt.Errorf("%q is not ARCH=BINARY\n%s", a, usage)
			}
			o.Binaries[arch] = bin
		}
		if *out == "" {
			return fmt.Errorf("-o is required\n%s", usage)
		}
		idx, err := image.Build(o)
		if err != nil {
			return err
		}
		if err := image.WriteArchive(*out, idx, o.Repository, o.Version); err != nil {
			return err
		}
		d, err := idx.Digest()
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s: %s:%s %s\n", *out, o.Repository, o.Version, d)
		return nil
	case "unpack":
		in := fl.String("i", "", "the image archive to read")
		arch := fl.String("arch", "amd64", "the architecture whose image to unpack")
		out := fl.String("o", "", "the directory to unpack into")
		if err := fl.Parse(args[1:]); err != nil {
			return err
		}
		if *in == "" || *out == "" {
			return fmt.Errorf("-i and -o are required\n%s", usage)
		}
		tag, err := image.Unpack(*in, *arch, *out)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s: linux/%s image of tag %s unpacked into %s\n", *in, *arch, tag, *out)
		return nil
	}
	fmt.Fprintln(stderr, usage)
	return flag.ErrHelp
}
