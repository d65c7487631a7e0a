// Package check decodes every manifest in deploy/kubernetes strictly into the Kubernetes
// API types (an unknown or misspelled field, or a duplicate one, fails), and checks what
// the distributed run depends on: the agents' Indexed Job, its spread and whole cores, the
// coordinator's agent count, the Service the agents dial, the token and the plan mounts,
// and the server's pod with its `loadlab probe` sidecar that the coordinator waits for.
package check

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// strict decodes as the API server does with fieldValidation=Strict: YAML with duplicate
// keys refused, then JSON matched case-sensitively with unknown fields refused.
func strict(doc []byte, into any) error {
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	problems, err := kjson.UnmarshalStrict(j, into)
	if err != nil {
		return err
	}
	if len(problems) > 0 {
		return fmt.Errorf("strict decoding: %v", errors.Join(problems...))
	}
	return nil
}

const dir = ".."

// kustomization is the subset of kustomize's file this directory uses, decoded strictly.
type kustomization struct {
	APIVersion         string   `json:"apiVersion"`
	Kind               string   `json:"kind"`
	Resources          []string `json:"resources"`
	ConfigMapGenerator []struct {
		Name  string   `json:"name"`
		Files []string `json:"files"`
	} `json:"configMapGenerator"`
	GeneratorOptions struct {
		DisableNameSuffixHash bool `json:"disableNameSuffixHash"`
	} `json:"generatorOptions"`
	// What `kustomize edit set image` and `kustomize edit set namespace` add (README).
	Namespace string `json:"namespace,omitempty"`
	Images    []struct {
		Name    string `json:"name"`
		NewName string `json:"newName,omitempty"`
		NewTag  string `json:"newTag,omitempty"`
		Digest  string `json:"digest,omitempty"`
	} `json:"images,omitempty"`
}

type manifests struct {
	jobs        map[string]*batchv1.Job
	deployments map[string]*appsv1.Deployment
	services    map[string]*corev1.Service
	secrets     map[string]*corev1.Secret
	configMaps  map[string]*corev1.ConfigMap
	kust        kustomization
	kinds       []string // kind/name of every document, in order
}

func newManifests() *manifests {
	return &manifests{
		jobs:        map[string]*batchv1.Job{},
		deployments: map[string]*appsv1.Deployment{},
		services:    map[string]*corev1.Service{},
		secrets:     map[string]*corev1.Secret{},
		configMaps:  map[string]*corev1.ConfigMap{},
	}
}

// decode reads one YAML document strictly into the type its kind names.
func decode(doc []byte, m *manifests) error {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(doc, &head); err != nil {
		return err
	}
	switch head.APIVersion + "/" + head.Kind {
	case "batch/v1/Job":
		var j batchv1.Job
		if err := strict(doc, &j); err != nil {
			return err
		}
		m.jobs[j.Name] = &j
	case "apps/v1/Deployment":
		var d appsv1.Deployment
		if err := strict(doc, &d); err != nil {
			return err
		}
		m.deployments[d.Name] = &d
	case "v1/Service":
		var s corev1.Service
		if err := strict(doc, &s); err != nil {
			return err
		}
		m.services[s.Name] = &s
	case "v1/Secret":
		var s corev1.Secret
		if err := strict(doc, &s); err != nil {
			return err
		}
		m.secrets[s.Name] = &s
	case "v1/ConfigMap":
		var c corev1.ConfigMap
		if err := strict(doc, &c); err != nil {
			return err
		}
		m.configMaps[c.Name] = &c
	case "kustomize.config.k8s.io/v1beta1/Kustomization":
		if err := strict(doc, &m.kust); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unexpected kind %s/%s", head.APIVersion, head.Kind)
	}
	var meta struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	_ = yaml.Unmarshal(doc, &meta)
	m.kinds = append(m.kinds, head.Kind+"/"+meta.Metadata.Name)
	return nil
}

func documents(text []byte) [][]byte {
	var out [][]byte
	for _, d := range bytes.Split(text, []byte("\n---")) {
		if len(bytes.TrimSpace(stripComments(d))) > 0 {
			out = append(out, d)
		}
	}
	return out
}

func stripComments(d []byte) []byte {
	var b bytes.Buffer
	for _, l := range strings.Split(string(d), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.Bytes()
}

func load(t *testing.T, edit func(name string, text []byte) []byte) (*manifests, error) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s: %v", dir, err)
	}
	m := newManifests()
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if edit != nil {
			text = edit(filepath.Base(f), text)
		}
		for i, doc := range documents(text) {
			if err := decode(doc, m); err != nil {
				return nil, fmt.Errorf("%s, document %d: %w", filepath.Base(f), i+1, err)
			}
		}
	}
	return m, nil
}

func arg(args []string, flag string) string {
	i := slices.Index(args, flag)
	if i < 0 || i+1 >= len(args) {
		return ""
	}
	return args[i+1]
}

// coordinatorArgs reads the flags of the `loadlab lab` line of the coordinator's script.
func coordinatorArgs(c corev1.Container) []string {
	script := strings.Join(append(append([]string{}, c.Command...), c.Args...), " ")
	script = strings.ReplaceAll(script, "\\\n", " ")
	return strings.Fields(script)
}

func TestManifestsDecodeStrictlyAndFitTogether(t *testing.T) {
	m, err := load(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	agents, coord := m.jobs["loadlab-agents"], m.jobs["loadlab-coordinator"]
	if agents == nil || coord == nil {
		t.Fatalf("jobs: %v", m.jobs)
	}
	// The agents: an Indexed Job, all at once.
	s := agents.Spec
	if s.CompletionMode == nil || *s.CompletionMode != batchv1.IndexedCompletion {
		t.Errorf("agents: completionMode must be Indexed")
	}
	if s.Completions == nil || s.Parallelism == nil || *s.Completions != *s.Parallelism {
		t.Errorf("agents: completions must equal parallelism")
	}
	n := *s.Completions
	pod := s.Template.Spec
	spread := false
	for _, c := range pod.TopologySpreadConstraints {
		if c.TopologyKey == "kubernetes.io/hostname" && c.MaxSkew == 1 && c.LabelSelector != nil {
			for k, v := range c.LabelSelector.MatchLabels {
				if s.Template.Labels[k] != v {
					t.Errorf("agents: spread selector %s=%s does not match the pod labels", k, v)
				}
			}
			spread = true
		}
	}
	if !spread {
		t.Errorf("agents: no topology spread constraint over kubernetes.io/hostname")
	}
	// Whole cores, requests equal to limits, everywhere.
	for name, j := range m.jobs {
		spec := j.Spec.Template.Spec
		for _, c := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
			req, lim := c.Resources.Requests.Cpu(), c.Resources.Limits.Cpu()
			if req.IsZero() || req.Cmp(*lim) != 0 || req.MilliValue()%1000 != 0 {
				t.Errorf("%s/%s: cpu request %v and limit %v must be equal whole cores", name, c.Name, req, lim)
			}
			mreq, mlim := c.Resources.Requests.Memory(), c.Resources.Limits.Memory()
			if mreq.IsZero() || mreq.Cmp(*mlim) != 0 {
				t.Errorf("%s/%s: memory request %v must equal its limit %v", name, c.Name, mreq, mlim)
			}
		}
	}
	a := pod.Containers[0]
	if len(a.Args) == 0 || a.Args[0] != "agent" {
		t.Errorf("agents: args must start with `agent`: %v", a.Args)
	}
	if th := arg(a.Args, "--threads"); th != fmt.Sprint(pod.Containers[0].Resources.Requests.Cpu().Value()) {
		t.Errorf("agents: --threads %q should match the %v cores requested", th, pod.Containers[0].Resources.Requests.Cpu())
	}
	// The coordinator waits for as many agents as the Job runs.
	cc := coord.Spec.Template.Spec.Containers[0]
	cargs := coordinatorArgs(cc)
	if got := arg(cargs, "--agents"); got != fmt.Sprint(n) {
		t.Errorf("coordinator: --agents %q but the agents Job runs %d", got, n)
	}
	// The agents dial the Service, which selects the coordinator's pod and port.
	host, port, _ := strings.Cut(arg(a.Args, "--coordinator"), ":")
	svc := m.services[host]
	if svc == nil {
		t.Fatalf("agents dial %q: no such Service", host)
	}
	for k, v := range svc.Spec.Selector {
		if coord.Spec.Template.Labels[k] != v {
			t.Errorf("Service %s selects %s=%s, not the coordinator's pod", host, k, v)
		}
	}
	found := false
	for _, p := range svc.Spec.Ports {
		if fmt.Sprint(p.Port) == port {
			for _, cp := range cc.Ports {
				if cp.Name == p.TargetPort.String() && strings.HasSuffix(arg(cargs, "--listen"), fmt.Sprint(":", cp.ContainerPort)) {
					found = true
				}
			}
		}
	}
	if !found {
		t.Errorf("Service port %s does not reach the coordinator's --listen %s", port, arg(cargs, "--listen"))
	}
	// The token: one Secret, mounted where both read it.
	for name, j := range map[string]*batchv1.Job{"agents": agents, "coordinator": coord} {
		spec := j.Spec.Template.Spec
		flags := spec.Containers[0].Args
		if name == "coordinator" {
			flags = cargs
		}
		tokenFile := arg(flags, "--token-file")
		ok := false
		for _, v := range spec.Volumes {
			if v.Secret == nil {
				continue
			}
			sec := m.secrets[v.Secret.SecretName]
			if sec == nil {
				t.Errorf("%s: Secret %s is not in the manifests", name, v.Secret.SecretName)
				continue
			}
			for _, vm := range spec.Containers[0].VolumeMounts {
				if vm.Name != v.Name {
					continue
				}
				for key := range sec.StringData {
					if filepath.Join(vm.MountPath, key) == tokenFile {
						ok = true
					}
				}
			}
		}
		if !ok {
			t.Errorf("%s: --token-file %s is not a key of a mounted Secret", name, tokenFile)
		}
	}
	checkProbeSidecar(t, m, cargs, arg(a.Args, "--coordinator"))
	// The plan: generated from plan.toml into the ConfigMap the coordinator mounts.
	if len(m.kust.ConfigMapGenerator) != 1 || !m.kust.GeneratorOptions.DisableNameSuffixHash {
		t.Fatalf("kustomization: one configMapGenerator without name suffix expected")
	}
	gen := m.kust.ConfigMapGenerator[0]
	for _, f := range gen.Files {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("kustomization: %v", err)
		}
	}
	for _, r := range m.kust.Resources {
		if _, err := os.Stat(filepath.Join(dir, r)); err != nil {
			t.Errorf("kustomization: %v", err)
		}
	}
	planOK := false
	for _, v := range coord.Spec.Template.Spec.Volumes {
		if v.ConfigMap != nil && v.ConfigMap.Name == gen.Name {
			for _, vm := range cc.VolumeMounts {
				if vm.Name == v.Name && slices.Contains(cargs, filepath.Join(vm.MountPath, gen.Files[0])) {
					planOK = true
				}
			}
		}
	}
	if !planOK {
		t.Errorf("coordinator: does not run the plan of ConfigMap %s", gen.Name)
	}
}

// secretKeyMounted says whether file is a key of a Secret of the manifests mounted in c.
func secretKeyMounted(m *manifests, spec corev1.PodSpec, c corev1.Container, file string) bool {
	for _, v := range spec.Volumes {
		if v.Secret == nil || m.secrets[v.Secret.SecretName] == nil {
			continue
		}
		for _, vm := range c.VolumeMounts {
			if vm.Name != v.Name {
				continue
			}
			for key := range m.secrets[v.Secret.SecretName].StringData {
				if filepath.Join(vm.MountPath, key) == file {
					return true
				}
			}
		}
	}
	return false
}

// checkProbeSidecar checks the server's pod: `loadlab probe` beside the app, seeing its
// processes (shareProcessNamespace), listening port named by --listen, dialing the same
// coordinator Service as the agents with the same token; the coordinator waits for it
// (--remote-probe); the plan loads the server through its Service.
func checkProbeSidecar(t *testing.T, m *manifests, cargs []string, coordinator string) {
	t.Helper()
	d := m.deployments["loadlab-server"]
	if d == nil {
		t.Fatalf("deployments: %v; want loadlab-server", m.deployments)
	}
	spec := d.Spec.Template.Spec
	if spec.ShareProcessNamespace == nil || !*spec.ShareProcessNamespace {
		t.Errorf("loadlab-server: shareProcessNamespace must be true (the probe sidecar must see the app's processes)")
	}
	for k, v := range d.Spec.Selector.MatchLabels {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("loadlab-server: selector %s=%s does not match its pod", k, v)
		}
	}
	var probe *corev1.Container
	ports := map[int32]string{}
	for i, c := range spec.Containers {
		words := coordinatorArgs(c)
		if slices.Contains(words, "probe") && slices.Contains(words, "loadlab") {
			probe = &spec.Containers[i]
			continue
		}
		for _, p := range c.Ports {
			ports[p.ContainerPort] = p.Name
		}
		// Requests equal limits: the pod is Guaranteed, the app's whole cores its own.
		if req, lim := c.Resources.Requests.Cpu(), c.Resources.Limits.Cpu(); req.IsZero() || req.Cmp(*lim) != 0 || req.MilliValue()%1000 != 0 {
			t.Errorf("loadlab-server/%s: cpu request %v and limit %v must be equal whole cores", c.Name, req, lim)
		}
	}
	if probe == nil {
		t.Fatalf("loadlab-server: no container runs `loadlab probe`")
	}
	if req, lim := probe.Resources.Requests.Cpu(), probe.Resources.Limits.Cpu(); req.IsZero() || req.Cmp(*lim) != 0 {
		t.Errorf("loadlab-server/%s: cpu request %v must equal its limit %v", probe.Name, req, lim)
	}
	if req, lim := probe.Resources.Requests.Memory(), probe.Resources.Limits.Memory(); req.IsZero() || req.Cmp(*lim) != 0 {
		t.Errorf("loadlab-server/%s: memory request %v must equal its limit %v", probe.Name, req, lim)
	}
	words := coordinatorArgs(*probe)
	listen := arg(words, "--listen")
	port, err := strconv.Atoi(listen)
	if _, ok := ports[int32(port)]; err != nil || !ok {
		t.Errorf("probe: --listen %q is not a port of the app (%v)", listen, ports)
	}
	if got := arg(words, "--coordinator"); got != coordinator {
		t.Errorf("probe: --coordinator %q, the agents dial %q", got, coordinator)
	}
	if f := arg(words, "--token-file"); !secretKeyMounted(m, spec, *probe, f) {
		t.Errorf("probe: --token-file %s is not a key of a mounted Secret", f)
	}
	if !slices.Contains(cargs, "--remote-probe") {
		t.Errorf("coordinator: the server's pod has a probe sidecar, but the coordinator has no --remote-probe")
	}
	// The plan's scenario loads the server through its Service.
	plan, err := os.ReadFile(filepath.Join(dir, "plan.toml"))
	if err != nil {
		t.Fatal(err)
	}
	svc := m.services["loadlab-server"]
	if svc == nil {
		t.Fatalf("no Service loadlab-server")
	}
	for k, v := range svc.Spec.Selector {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("Service loadlab-server selects %s=%s, not the server's pod", k, v)
		}
	}
	reached := false
	for _, p := range svc.Spec.Ports {
		url := fmt.Sprintf(`url = "http://loadlab-server:%d/`, p.Port)
		if p.TargetPort.String() == ports[int32(port)] && bytes.Contains(plan, []byte(url)) {
			reached = true
		}
	}
	if !reached {
		t.Errorf("plan.toml's url does not reach the app's port %s through Service loadlab-server", listen)
	}
}

func TestAMisspelledFieldFails(t *testing.T) {
	for _, c := range []struct{ file, from, to string }{
		{"agents.yaml", "completionMode:", "completionMod:"},
		{"agents.yaml", "topologySpreadConstraints:", "topologySpreadConstraint:"},
		{"coordinator.yaml", "targetPort:", "targetport:"},
		{"coordinator.yaml", "readOnlyRootFilesystem:", "readOnlyRootFileSystem:"},
		{"secret.yaml", "stringData:", "stringdata:"},
		{"server.yaml", "shareProcessNamespace:", "shareProcessNameSpace:"},
		{"kustomization.yaml", "configMapGenerator:", "configMapGenerators:"},
	} {
		_, err := load(t, func(name string, text []byte) []byte {
			if name != c.file {
				return text
			}
			if !bytes.Contains(text, []byte(c.from)) {
				t.Fatalf("%s has no %q to misspell", c.file, c.from)
			}
			return bytes.Replace(text, []byte(c.from), []byte(c.to), 1)
		})
		if err == nil || !strings.Contains(err.Error(), "unknown field") {
			t.Errorf("%s with %q: want an unknown-field error, got %v", c.file, c.to, err)
		}
	}
}

// TestRenderedKustomization decodes what the kustomization makes of this directory (check.sh
// renders it, with kubectl or kustomize): the generated ConfigMap too, strictly, and exactly
// the resources expected. It fails, not skips, without the rendering.
func TestRenderedKustomization(t *testing.T) {
	path := os.Getenv("LOADLAB_K8S_RENDERED")
	if path == "" {
		t.Fatal("LOADLAB_K8S_RENDERED not set: run ../check.sh, which renders the kustomization")
	}
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := newManifests()
	for i, doc := range documents(text) {
		if err := decode(doc, m); err != nil {
			t.Fatalf("rendered document %d: %v", i+1, err)
		}
	}
	got := slices.Clone(m.kinds)
	slices.Sort(got)
	want := []string{"ConfigMap/loadlab-plan", "Deployment/loadlab-server", "Job/loadlab-agents", "Job/loadlab-coordinator", "Secret/loadlab-token", "Service/loadlab-coordinator", "Service/loadlab-server"}
	if !slices.Equal(got, want) {
		t.Errorf("rendered resources %v, want %v", got, want)
	}
	plan, err := os.ReadFile(filepath.Join(dir, "plan.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if cm := m.configMaps["loadlab-plan"]; cm == nil || cm.Data["plan.toml"] != string(plan) {
		t.Errorf("the rendered ConfigMap loadlab-plan does not hold plan.toml")
	}
}
