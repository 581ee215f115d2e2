// Package kubernetes holds p2pcheck's manifests; its tests decode them strictly
// against the Kubernetes API types and check what a cluster needs of them.
package kubernetes

import (
	"bytes"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"
)

// manifest decodes daemonset.yaml strictly: an unknown or misspelt field, a
// duplicate key or a value of the wrong type is an error.
func manifest(t *testing.T) (*corev1.Namespace, *appsv1.DaemonSet) {
	t.Helper()
	b, err := os.ReadFile("daemonset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var ns *corev1.Namespace
	var ds *appsv1.DaemonSet
	for i, doc := range bytes.Split(b, []byte("\n---\n")) {
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		var obj any
		switch meta.APIVersion + " " + meta.Kind {
		case "v1 Namespace":
			ns = &corev1.Namespace{}
			obj = ns
		case "apps/v1 DaemonSet":
			ds = &appsv1.DaemonSet{}
			obj = ds
		default:
			t.Fatalf("document %d: unexpected %s %s", i, meta.APIVersion, meta.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			t.Fatalf("document %d (%s): %v", i, meta.Kind, err)
		}
	}
	if ns == nil || ds == nil {
		t.Fatalf("want a Namespace and a DaemonSet, got %v and %v", ns, ds)
	}
	return ns, ds
}

// TestStrictDecoding: the typo a lenient decoder would drop is caught.
func TestStrictDecoding(t *testing.T) {
	manifest(t)
	var ds appsv1.DaemonSet
	if err := yaml.UnmarshalStrict([]byte("apiVersion: apps/v1\nkind: DaemonSet\nspec:\n  template:\n    spec:\n      nodeSelecter: {}\n"), &ds); err == nil {
		t.Error("a misspelt field decodes without error")
	}
}

// TestSchedulesOnGPUNodes: the DaemonSet's own node affinity and tolerations
// admit a GPU node labelled by stock NFD (class 0302 or 0300), by NFD as the
// GPU Operator configures it, or by the GPU Operator alone, tainted as GPU
// nodes commonly are; and no node without those labels.
func TestSchedulesOnGPUNodes(t *testing.T) {
	_, ds := manifest(t)
	pod := &corev1.Pod{Spec: ds.Spec.Template.Spec}
	affinity := nodeaffinity.GetRequiredNodeAffinity(pod)
	taints := [][]corev1.Taint{
		nil,
		{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}},
		{{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoExecute}},
		{{Key: "sku", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}},
	}
	for _, tt := range []struct {
		name   string
		labels map[string]string
		want   bool
	}{
		{"stock NFD, 3D controller", map[string]string{"feature.node.kubernetes.io/pci-0302_10de.present": "true"}, true},
		{"stock NFD, VGA", map[string]string{"feature.node.kubernetes.io/pci-0300_10de.present": "true"}, true},
		{"GPU Operator NFD", map[string]string{"feature.node.kubernetes.io/pci-10de.present": "true"}, true},
		{"GPU Operator", map[string]string{"nvidia.com/gpu.present": "true"}, true},
		{"both", map[string]string{"feature.node.kubernetes.io/pci-0302_10de.present": "true", "nvidia.com/gpu.present": "true"}, true},
		{"no GPU", map[string]string{"feature.node.kubernetes.io/pci-0200_15b3.present": "true"}, false},
		{"label false", map[string]string{"nvidia.com/gpu.present": "false"}, false},
		{"unlabelled", nil, false},
	} {
		for _, tn := range taints {
			node := &corev1.Node{Spec: corev1.NodeSpec{Taints: tn}}
			node.Name, node.Labels = "node1", tt.labels
			ok, err := affinity.Match(node)
			if err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
			if ok != tt.want {
				t.Errorf("%s: node affinity matches %v, want %v", tt.name, ok, tt.want)
			}
			for _, taint := range tn {
				if !tolerated(ds.Spec.Template.Spec.Tolerations, taint) {
					t.Errorf("%s: taint %v not tolerated", tt.name, taint)
				}
			}
		}
	}
}

func tolerated(tols []corev1.Toleration, taint corev1.Taint) bool {
	return slices.ContainsFunc(tols, func(tol corev1.Toleration) bool { return tol.ToleratesTaint(klog.Background(), &taint, false) })
}

// TestPodSecurity: what the manifest promises about privilege and mounts.
func TestPodSecurity(t *testing.T) {
	ns, ds := manifest(t)
	if got := ns.Labels["pod-security.kubernetes.io/enforce"]; got != "privileged" || ds.Namespace != ns.Name {
		t.Errorf("namespace %q enforce=%q, DaemonSet in %q; want the DaemonSet in a namespace enforcing privileged", ns.Name, got, ds.Namespace)
	}
	spec := ds.Spec.Template.Spec
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Error("the service-account token is mounted")
	}
	if sc := spec.SecurityContext; sc == nil || sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Error("no RuntimeDefault seccomp profile for the pod")
	}
	if spec.HostNetwork || spec.HostPID || spec.HostIPC {
		t.Error("host namespaces shared")
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(spec.Containers))
	}
	checkContainerSecurity(t, spec.Containers[0])
	checkHostPaths(t, spec)

}

// checkContainerSecurity: the container is unprivileged, with a read-only root
// file system and every capability dropped but SYS_ADMIN.
func checkContainerSecurity(t *testing.T, c corev1.Container) {
	t.Helper()
	sc := c.SecurityContext
	if sc == nil || sc.Privileged != nil && *sc.Privileged || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("the container is privileged or its root file system writable")
	}
	if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || !slices.Equal(sc.Capabilities.Add, []corev1.Capability{"SYS_ADMIN"}) {
		t.Errorf("capabilities %+v, want all dropped but SYS_ADMIN", sc.Capabilities)
	}
}

// checkHostPaths: every host path is one p2pcheck reads (read-only, under
// /host) or writes to.
func checkHostPaths(t *testing.T, spec corev1.PodSpec) {
	t.Helper()
	writable := map[string]bool{"/etc/kubernetes/node-feature-discovery/features.d": true, "/var/lib/node_exporter/textfile": true}
	readOnly := map[string]bool{"/sys": true, "/proc": true, "/boot": true, "/etc": true, "/dev": true}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range spec.Containers[0].VolumeMounts {
		mounts[m.Name] = m
	}
	for _, v := range spec.Volumes {
		hp := v.HostPath
		if hp == nil {
			t.Errorf("volume %s is not a hostPath", v.Name)
			continue
		}
		m, ok := mounts[v.Name]
		switch {
		case !ok:
			t.Errorf("volume %s is not mounted", v.Name)
		case readOnly[hp.Path] && (!m.ReadOnly || m.MountPath != "/host"+hp.Path):
			t.Errorf("host %s mounted at %s read-only=%v, want /host%[1]s read-only", hp.Path, m.MountPath, m.ReadOnly)
		case !readOnly[hp.Path] && !writable[hp.Path]:
			t.Errorf("host path %s is neither read nor written by p2pcheck", hp.Path)
		}
	}
}

// TestCommand: the container runs p2pcheck itself, periodically, with no
// shell, from an image with a release tag.
func TestCommand(t *testing.T) {
	_, ds := manifest(t)
	c := ds.Spec.Template.Spec.Containers[0]
	if len(c.Command) == 0 || c.Command[0] != "/usr/bin/p2pcheck" || len(c.Args) > 0 {
		t.Fatalf("command %q args %q, want /usr/bin/p2pcheck and its flags", c.Command, c.Args)
	}
	for _, want := range []string{"--interval=5m", "--root=/host", "--quick", "--nfd=/features.d/p2pcheck", "--prometheus=/textfile/p2pcheck.prom"} {
		if !slices.Contains(c.Command, want) {
			t.Errorf("command %q lacks %s", c.Command, want)
		}
	}
	if strings.Contains(strings.Join(c.Command, " "), "sh") {
		t.Errorf("command %q runs a shell", c.Command)
	}
	if !regexp.MustCompile(`^ghcr\.io/p2pkit/p2pcheck:v\d+\.\d+\.\d+$`).MatchString(c.Image) {
		t.Errorf("image %q, want ghcr.io/p2pkit/p2pcheck:vX.Y.Z", c.Image)
	}
}

// TestHostMounts: the host's /etc is mounted read-only as a directory under
// /host, so nccl_env (and memlock_limit) judge the host's files with
// --root=/host; /boot may be missing on the node (hostPath type "": no check,
// nothing created by the kubelet), and no read-only mount is of a type that
// creates its path on the host.
func TestHostMounts(t *testing.T) {
	_, ds := manifest(t)
	spec := ds.Spec.Template.Spec
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range spec.Containers[0].VolumeMounts {
		mounts[m.Name] = m
	}
	types := map[string]corev1.HostPathType{}
	for _, v := range spec.Volumes {
		if v.HostPath == nil {
			continue
		}
		var typ corev1.HostPathType
		if v.HostPath.Type != nil {
			typ = *v.HostPath.Type
		}
		types[v.HostPath.Path] = typ
		m := mounts[v.Name]
		if m.ReadOnly && (typ == corev1.HostPathDirectoryOrCreate || typ == corev1.HostPathFileOrCreate) {
			t.Errorf("read-only host %s has type %s, which creates it on the host", v.HostPath.Path, typ)
		}
		if v.HostPath.Path == "/etc" && (!m.ReadOnly || m.MountPath != "/host/etc" || m.SubPath != "") {
			t.Errorf("host /etc mounted at %s read-only=%v subPath=%q, want the directory at /host/etc read-only", m.MountPath, m.ReadOnly, m.SubPath)
		}
	}
	want := map[string]corev1.HostPathType{
		"/sys":  corev1.HostPathDirectory,
		"/proc": corev1.HostPathDirectory,
		"/boot": corev1.HostPathUnset,
		"/etc":  corev1.HostPathDirectory,
		"/dev":  corev1.HostPathDirectory,
		"/etc/kubernetes/node-feature-discovery/features.d": corev1.HostPathDirectoryOrCreate,
		"/var/lib/node_exporter/textfile":                   corev1.HostPathDirectoryOrCreate,
	}
	if diff := cmp.Diff(want, types); diff != "" {
		t.Errorf("host paths and their types (-want +got):\n%s", diff)
	}
	if !slices.Contains(spec.Containers[0].Command, "--root=/host") {
		t.Errorf("command %q does not read the host under /host", spec.Containers[0].Command)
	}
}
