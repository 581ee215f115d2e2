package image

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	specsv1 "github.com/opencontainers/image-spec/specs-go/v1"
)

// TestRegistryPush pushes the image with the README's own push command (read
// from README.md, so the two cannot drift) with the real skopeo into Debian's
// docker-registry (the Distribution registry) on 127.0.0.1, then pulls both
// platforms back with "skopeo inspect --raw": the pushed index is the built
// one byte for byte (the same digest), each platform's manifest is there under
// its digest, and each config says its architecture and carries the labels.
//
// The image is a small one built here, or the release's archive when
// P2PKIT_IMAGE_ARCHIVE names it (.ci/run, after make release): then its
// revision label must be this checkout's HEAD and its creation time the
// commit's. Without skopeo or docker-registry the test skips, and fails under
// CI=true (.ci/run installs both).
func TestRegistryPush(t *testing.T) {
	var tools []string
	for _, tool := range []string{"skopeo", "docker-registry"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s not found (apt-get install skopeo docker-registry): %v", tool, err)
			}
			t.Skipf("%s not found (Debian: apt-get install skopeo docker-registry); CI=true makes this a failure", tool)
		}
		tools = append(tools, p)
	}
	skopeo, registry := tools[0], tools[1]
	dir := t.TempDir()

	archive, built, version, wantLabels := testArchive(t, dir)
	cmdline := readmePushCommand(t)
	host := startRegistry(t, registry, dir)
	args := pushArgs(t, cmdline, archive, "127.0.0.1:"+host+"/p2pkit/p2pcheck", version)
	t.Logf("pushing: skopeo %s", strings.Join(args, " "))

	// The registry's certificate is trusted through SSL_CERT_FILE (Go's
	// crypto/x509 reads it), which keeps the command line the README's.
	env := append(os.Environ(), "SSL_CERT_FILE="+filepath.Join(dir, "cert.pem"), "HOME="+dir, "XDG_RUNTIME_DIR="+dir)
	skopeoRun := func(args ...string) []byte {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, skopeo, args...)
		cmd.Env = env
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("skopeo %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
		}
		return out
	}
	skopeoRun(args...)

	repo := "docker://127.0.0.1:" + host + "/p2pkit/p2pcheck"
	raw := skopeoRun("inspect", "--raw", repo+":"+version)
	if got := fmt.Sprintf("sha256:%x", sha256.Sum256(raw)); got != built {
		t.Errorf("pushed index %s, built %s:\n%s", got, built, raw)
	}
	var idx specsv1.Index
	if err := json.Unmarshal(raw, &idx); err != nil {
		t.Fatalf("pushed index: %v\n%s", err, raw)
	}
	var platforms []string
	for _, m := range idx.Manifests {
		arch := m.Platform.Architecture
		platforms = append(platforms, m.Platform.OS+"/"+arch)
		man := skopeoRun("inspect", "--raw", repo+"@"+m.Digest.String())
		if got := fmt.Sprintf("sha256:%x", sha256.Sum256(man)); got != m.Digest.String() {
			t.Errorf("%s manifest pulled as %s, want %s", arch, got, m.Digest)
		}
		var cf struct {
			Architecture string
			OS           string
			Config       struct{ Labels map[string]string }
		}
		if err := json.Unmarshal(skopeoRun("inspect", "--config", repo+"@"+m.Digest.String()), &cf); err != nil {
			t.Fatal(err)
		}
		if cf.Architecture != arch || cf.OS != "linux" {
			t.Errorf("%s config says %s/%s", arch, cf.OS, cf.Architecture)
		}
		if diff := cmp.Diff(wantLabels, cf.Config.Labels); diff != "" {
			t.Errorf("%s labels (-want +got):\n%s", arch, diff)
		}
	}
	if diff := cmp.Diff([]string{"linux/amd64", "linux/arm64"}, platforms); diff != "" {
		t.Errorf("pushed platforms (-want +got):\n%s", diff)
	}
}

// testArchive is the image archive to push, its index digest as built, its tag
// and the labels each of its images must carry.
func testArchive(t *testing.T, dir string) (archive, digest, version string, labels map[string]string) {
	t.Helper()
	if archive = os.Getenv("P2PKIT_IMAGE_ARCHIVE"); archive != "" {
		digest, version = archiveIndex(t, archive)
		head := git(t, "rev-parse", "HEAD")
		sec, err := strconv.ParseInt(git(t, "log", "-1", "--format=%ct"), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return archive, digest, version, labels0(version, head, time.Unix(sec, 0))
	}
	o := testOptions(t, dir)
	idx, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}
	archive = filepath.Join(dir, "p2pcheck-image.oci.tar")
	if err := WriteArchive(archive, idx, o.Repository, o.Version); err != nil {
		t.Fatal(err)
	}
	d, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := archiveIndex(t, archive); got != d.String() {
		t.Fatalf("archive's index.json names %s, built %s", got, d)
	}
	return archive, d.String(), o.Version, labels0(o.Version, o.Revision, o.Created)
}

func labels0(version, revision string, created time.Time) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":    "p2pcheck",
		"org.opencontainers.image.version":  version,
		"org.opencontainers.image.revision": revision,
		"org.opencontainers.image.source":   "https://github.com/p2pkit/p2pkit",
		"org.opencontainers.image.licenses": "Apache-2.0",
		"org.opencontainers.image.created":  created.UTC().Format(time.RFC3339),
	}
}

// archiveIndex is the digest and tag of the one image index an archive's
// index.json names.
func archiveIndex(t *testing.T, archive string) (digest, tag string) {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := extract(tar.NewReader(f), dir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var top specsv1.Index
	if err := json.Unmarshal(b, &top); err != nil || len(top.Manifests) != 1 {
		t.Fatalf("%s index.json: %v, %d entries, want 1", archive, err, len(top.Manifests))
	}
	return top.Manifests[0].Digest.String(), top.Manifests[0].Annotations["org.opencontainers.image.ref.name"]
}

func git(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", "../.."}, args...)...).Output()
	if err != nil {
		t.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out))
}

// readmePushCommand is the one "skopeo copy" command line of README.md's
// shell blocks, as fields.
func readmePushCommand(t *testing.T) []string {
	t.Helper()
	f, err := os.Open("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var found [][]string
	inSh := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "```"):
			inSh = !inSh && strings.TrimPrefix(line, "```") == "sh"
		case inSh && strings.HasPrefix(line, "skopeo copy "):
			if strings.ContainsAny(line, "'\"$`\\#|;&") {
				t.Fatalf("README's push command is more than plain words: %s", line)
			}
			found = append(found, strings.Fields(line))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 {
		t.Fatalf("README.md has %d skopeo copy commands in sh blocks, want 1", len(found))
	}
	return found[0]
}

// pushArgs are skopeo's arguments of the README's command line with the
// archive, the repository and the tag of this test: each argument stays the
// README's but for the source's file and tag and the destination's repository
// and tag.
func pushArgs(t *testing.T, cmdline []string, archive, repository, version string) []string {
	t.Helper()
	var args []string
	var src, dst bool
	for _, a := range cmdline[1:] {
		switch {
		case strings.HasPrefix(a, "oci-archive:"):
			file, _, ok := cutLast(strings.TrimPrefix(a, "oci-archive:"), ":")
			if !ok || file != "dist/p2pcheck-image.oci.tar" {
				t.Fatalf("README pushes %q, want oci-archive:dist/p2pcheck-image.oci.tar:TAG", a)
			}
			a, src = "oci-archive:"+archive+":"+version, true
		case strings.HasPrefix(a, "docker://"):
			a, dst = "docker://"+repository+":"+version, true
		}
		args = append(args, a)
	}
	if !src || !dst {
		t.Fatalf("README's push command %q has no oci-archive: source or docker:// destination", cmdline)
	}
	return args
}

func cutLast(s, sep string) (before, after string, found bool) {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i], s[i+len(sep):], true
	}
	return s, "", false
}

// startRegistry runs the Distribution registry on a free port of 127.0.0.1
// with its storage in dir, from a configuration file written here, serving
// HTTPS with a self-signed certificate for 127.0.0.1 (dir/cert.pem) until the
// test ends, and returns the port once the registry answers.
func startRegistry(t *testing.T, registry, dir string) (port string) {
	t.Helper()
	pool := selfSigned(t, filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"))
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ = net.SplitHostPort(l.Addr().String())
	l.Close()
	cfg := filepath.Join(dir, "registry.yml")
	err = os.WriteFile(cfg, fmt.Appendf(nil, `version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: %s
http:
  addr: 127.0.0.1:%s
  secret: p2pkit-test
  tls:
    certificate: %s
    key: %s
`, filepath.Join(dir, "storage"), port, filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(registry, "serve", cfg)
	log, err := os.Create(filepath.Join(dir, "registry.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	deadline := time.After(time.Minute)
	for {
		resp, err := client.Get("https://127.0.0.1:" + port + "/v2/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return port
			}
		}
		select {
		case err := <-exited:
			b, _ := os.ReadFile(log.Name())
			t.Fatalf("docker-registry exited: %v\n%s", err, b)
		case <-deadline:
			b, _ := os.ReadFile(log.Name())
			t.Fatalf("docker-registry does not answer on 127.0.0.1:%s after a minute: %v\n%s", port, err, b)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key, and
// returns a pool that trusts it.
func selfSigned(t *testing.T, certFile, keyFile string) *x509.CertPool {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return pool
}
