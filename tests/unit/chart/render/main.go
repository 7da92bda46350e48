// chart-render: renders charts/vgpu the way `helm template` does, for the chart test, on
// machines without helm. It gives the templates Go's text/template with Sprig and Helm's
// own functions (include, tpl, required, fail, toYaml, fromYaml, toJson, lookup: always
// empty, as in `helm template`), values from values.yaml merged with --values files, and
// checks that every rendered document is YAML with apiVersion, kind and metadata.name.
//
//	chart-render -chart charts/vgpu [-values extra.yaml]... [-kube-version v1.29.0] [-out dir]
//
// Built in GOPATH mode from Debian's packages (golang-go, golang-github-masterminds-
// sprig-dev, golang-github-ghodss-yaml-dev); tests/unit/chart registers it only when
// they are installed.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig"
	"github.com/ghodss/yaml"
)

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func die(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "chart-render: "+format+"\n", args...)
	os.Exit(1)
}

func readYAML(path string) map[string]interface{} {
	data, err := os.ReadFile(path)
	if err != nil {
		die("%v", err)
	}
	out := map[string]interface{}{}
	if err := yaml.Unmarshal(data, &out); err != nil {
		die("%s: %v", path, err)
	}
	return out
}

// mergeValues lays b over a as Helm does with -f: maps merge, anything else replaces,
// null deletes.
func mergeValues(a, b map[string]interface{}) map[string]interface{} {
	for k, v := range b {
		if v == nil {
			delete(a, k)
			continue
		}
		if bm, ok := v.(map[string]interface{}); ok {
			if am, ok := a[k].(map[string]interface{}); ok {
				a[k] = mergeValues(am, bm)
				continue
			}
		}
		a[k] = v
	}
	return a
}

type files struct{ root string }

func (f files) Get(name string) string {
	data, err := os.ReadFile(filepath.Join(f.root, name))
	if err != nil {
		return ""
	}
	return string(data)
}

func main() {
	chart := flag.String("chart", "", "chart folder")
	kubeVersion := flag.String("kube-version", "v1.29.0", "the cluster version .Capabilities reports")
	outDir := flag.String("out", "", "write each template's output here")
	namespace := flag.String("namespace", "kube-system", "release namespace")
	release := flag.String("release", "vgpu", "release name")
	var valueFiles listFlag
	flag.Var(&valueFiles, "values", "values file laid over values.yaml (repeatable)")
	flag.Parse()
	if *chart == "" {
		die("-chart is required")
	}

	values := readYAML(filepath.Join(*chart, "values.yaml"))
	for _, f := range valueFiles {
		values = mergeValues(values, readYAML(f))
	}
	meta := readYAML(filepath.Join(*chart, "Chart.yaml"))
	chartName, _ := meta["name"].(string)
	top := map[string]interface{}{
		"Values": values,
		"Chart": map[string]interface{}{
			"Name": meta["name"], "Version": meta["version"], "AppVersion": meta["appVersion"],
		},
		"Release": map[string]interface{}{
			"Name": *release, "Namespace": *namespace, "Service": "Helm", "IsInstall": true, "IsUpgrade": false,
		},
		"Capabilities": map[string]interface{}{
			"KubeVersion": map[string]interface{}{"Version": *kubeVersion, "GitVersion": *kubeVersion},
		},
		"Files": files{*chart},
	}

	root := template.New("root")
	funcs := sprig.TxtFuncMap()
	delete(funcs, "env")
	delete(funcs, "expandenv")
	includeDepth := 0
	funcs["include"] = func(name string, data interface{}) (string, error) {
		includeDepth++
		defer func() { includeDepth-- }()
		if includeDepth > 100 {
			return "", fmt.Errorf("include %q: too deep", name)
		}
		var buf bytes.Buffer
		err := root.ExecuteTemplate(&buf, name, data)
		return buf.String(), err
	}
	funcs["tpl"] = func(text string, data interface{}) (string, error) {
		t, err := root.Clone()
		if err != nil {
			return "", err
		}
		t, err = t.New("tpl").Parse(text)
		if err != nil {
			return "", err
		}
		var buf bytes.Buffer
		err = t.Execute(&buf, data)
		return buf.String(), err
	}
	funcs["required"] = func(message string, v interface{}) (interface{}, error) {
		if v == nil {
			return nil, fmt.Errorf("%s", message)
		}
		if s, ok := v.(string); ok && s == "" {
			return nil, fmt.Errorf("%s", message)
		}
		return v, nil
	}
	funcs["fail"] = func(message string) (string, error) { return "", fmt.Errorf("%s", message) }
	funcs["toYaml"] = func(v interface{}) string {
		data, err := yaml.Marshal(v)
		if err != nil {
			return ""
		}
		return strings.TrimSuffix(string(data), "\n")
	}
	funcs["fromYaml"] = func(s string) map[string]interface{} {
		m := map[string]interface{}{}
		if err := yaml.Unmarshal([]byte(s), &m); err != nil {
			m["Error"] = err.Error()
		}
		return m
	}
	funcs["lookup"] = func(apiVersion, kind, namespace, name string) (map[string]interface{}, error) {
		return map[string]interface{}{}, nil
	}
	root.Funcs(funcs).Option("missingkey=zero")

	templateDir := filepath.Join(*chart, "templates")
	entries, err := os.ReadDir(templateDir)
	if err != nil {
		die("%v", err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(templateDir, e.Name()))
		if err != nil {
			die("%v", err)
		}
		name := chartName + "/templates/" + e.Name()
		if _, err := root.New(name).Parse(string(data)); err != nil {
			die("%v", err)
		}
		names = append(names, name)
	}
	sort.Strings(names)

	failed := false
	for _, name := range names {
		base := filepath.Base(name)
		if strings.HasPrefix(base, "_") {
			continue
		}
		scope := map[string]interface{}{}
		for k, v := range top {
			scope[k] = v
		}
		scope["Template"] = map[string]interface{}{"Name": name, "BasePath": chartName + "/templates"}
		var buf bytes.Buffer
		if err := root.ExecuteTemplate(&buf, name, scope); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
			failed = true
			continue
		}
		text := strings.ReplaceAll(buf.String(), "<no value>", "")
		if *outDir != "" {
			if err := os.WriteFile(filepath.Join(*outDir, base), []byte(text), 0o644); err != nil {
				die("%v", err)
			}
		}
		if strings.HasSuffix(base, ".txt") {
			continue
		}
		for i, doc := range strings.Split(text, "\n---") {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			obj := map[string]interface{}{}
			if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
				fmt.Fprintf(os.Stderr, "%s document %d is not YAML: %v\n%s\n", name, i, err, doc)
				failed = true
				continue
			}
			if len(obj) == 0 {
				continue
			}
			md, _ := obj["metadata"].(map[string]interface{})
			if obj["apiVersion"] == nil || obj["kind"] == nil || md == nil || md["name"] == nil {
				fmt.Fprintf(os.Stderr, "%s document %d lacks apiVersion, kind or metadata.name\n%s\n", name, i, doc)
				failed = true
				continue
			}
			fmt.Printf("%s: %s %s\n", base, obj["kind"], md["name"])
		}
	}
	if failed {
		os.Exit(1)
	}
}
