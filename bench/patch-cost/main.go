// patch-cost: what kube-apiserver pays to apply a webhook's JSON Patch (bench/apiserver.ts, phase
// `patch`). kube-apiserver applies it with gopkg.in/evanphx/json-patch.v4 (k8s.io/apiserver
// pkg/admission/plugin/webhook/mutating/dispatcher.go: DecodePatch, then Apply to the object it
// encoded); built by provide.sh against the version k8s.io/apiserver pins, this does the same two
// calls per Pod for two patches that give the same Pod:
//   - serve: serve's own patch (additive: `add .../env/-` per variable, `add .../volumeMounts/-`);
//   - whole: serve's operations outside /spec/containers and /spec/initContainers, then one `add`
//     of each array serve touched, whole, as serve's patch leaves it (raw bytes, not re-encoded),
//     the shape the AWS peer answers with.
//
// It checks that both results decode to the same Pod (numbers compared as written), then times
// each: a warm-up round, then rounds of every Pod once, serve's and whole's rounds alternating;
// it prints the median round's CPU µs per apply as JSON. CPU time (getrusage: this process, every
// thread, the garbage collector's included, as kube-apiserver pays it), not wall time: on a shared
// machine the time other processes hold the CPU does not count.
//
//	patch-cost CASES.json ROUNDS      (CASES.json: [{"name", "pod", "patch"}])
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"syscall"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
)

type testCase struct {
	Name  string          `json:"name"`
	Pod   json.RawMessage `json:"pod"`
	Patch json.RawMessage `json:"patch"`
}

type result struct {
	Pods       int     `json:"pods"`
	Same       int     `json:"same"`
	Rounds     int     `json:"rounds"`
	ServeUs    float64 `json:"serveUs"`
	WholeUs    float64 `json:"wholeUs"`
	ServeOps   float64 `json:"serveOps"`
	WholeOps   float64 `json:"wholeOps"`
	ServeBytes float64 `json:"serveBytes"`
	WholeBytes float64 `json:"wholeBytes"`
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "patch-cost: "+format+"\n", args...)
	os.Exit(1)
}

// arrayOf names the container array a path is in ("containers", "initContainers"), or "".
func arrayOf(path string) string {
	for _, name := range []string{"containers", "initContainers"} {
		if path == "/spec/"+name || strings.HasPrefix(path, "/spec/"+name+"/") {
			return name
		}
	}
	return ""
}

func apply(patch, pod []byte) ([]byte, error) {
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		return nil, err
	}
	return p.Apply(pod)
}

// whole rewrites serve's patch: the arrays it touches added whole, as its own patch leaves them.
func whole(c testCase) ([]byte, int, error) {
	var ops []map[string]json.RawMessage
	if err := json.Unmarshal(c.Patch, &ops); err != nil {
		return nil, 0, err
	}
	touched := map[string]bool{}
	kept := []map[string]json.RawMessage{}
	for _, op := range ops {
		var path string
		if err := json.Unmarshal(op["path"], &path); err != nil {
			return nil, 0, err
		}
		if name := arrayOf(path); name != "" {
			touched[name] = true
		} else {
			kept = append(kept, op)
		}
	}
	after, err := apply(c.Patch, c.Pod)
	if err != nil {
		return nil, 0, err
	}
	var pod struct {
		Spec map[string]json.RawMessage `json:"spec"`
	}
	if err := json.Unmarshal(after, &pod); err != nil {
		return nil, 0, err
	}
	for _, name := range []string{"initContainers", "containers"} {
		if touched[name] {
			path, _ := json.Marshal("/spec/" + name)
			kept = append(kept, map[string]json.RawMessage{"op": json.RawMessage(`"add"`), "path": path, "value": pod.Spec[name]})
		}
	}
	out, err := json.Marshal(kept)
	return out, len(kept), err
}

func decoded(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	return v, err
}

// samePod applies both patches to the Pod and compares the results decoded.
func samePod(c testCase, w []byte) error {
	a, err := apply(c.Patch, c.Pod)
	if err != nil {
		return fmt.Errorf("serve's patch: %w", err)
	}
	b, err := apply(w, c.Pod)
	if err != nil {
		return fmt.Errorf("the whole-array patch: %w", err)
	}
	da, errA := decoded(a)
	db, errB := decoded(b)
	if errA != nil || errB != nil || !reflect.DeepEqual(da, db) {
		return fmt.Errorf("the two patches give different Pods")
	}
	return nil
}

// cpuUs: this process's CPU time so far, user and system, µs.
func cpuUs() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		fail("getrusage: %v", err)
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e3
}

// round applies every patch to its Pod once: CPU µs per apply.
func round(pods, patches [][]byte) float64 {
	start := cpuUs()
	for i := range pods {
		if _, err := apply(patches[i], pods[i]); err != nil {
			fail("%v", err)
		}
	}
	return (cpuUs() - start) / float64(len(pods))
}

func median(xs []float64) float64 {
	sort.Float64s(xs)
	return xs[len(xs)/2]
}

func main() {
	if len(os.Args) != 3 {
		fail("usage: patch-cost CASES.json ROUNDS")
	}
	rounds, err := strconv.Atoi(os.Args[2])
	if err != nil || rounds < 1 {
		fail("ROUNDS: %q is not a whole number of 1 or more", os.Args[2])
	}
	raw, err := os.ReadFile(os.Args[1])
	if err != nil {
		fail("%v", err)
	}
	var cases []testCase
	if err := json.Unmarshal(raw, &cases); err != nil || len(cases) == 0 {
		fail("%s: no cases (%v)", os.Args[1], err)
	}
	r := result{Pods: len(cases), Rounds: rounds}
	pods, serve, wholes := make([][]byte, len(cases)), make([][]byte, len(cases)), make([][]byte, len(cases))
	for i, c := range cases {
		w, n, err := whole(c)
		if err == nil {
			err = samePod(c, w)
		}
		if err != nil {
			fail("Pod %s: %v", c.Name, err)
		}
		r.Same++
		var ops []json.RawMessage
		_ = json.Unmarshal(c.Patch, &ops)
		pods[i], serve[i], wholes[i] = c.Pod, c.Patch, w
		r.ServeOps += float64(len(ops)) / float64(len(cases))
		r.WholeOps += float64(n) / float64(len(cases))
		r.ServeBytes += float64(len(c.Patch)) / float64(len(cases))
		r.WholeBytes += float64(len(w)) / float64(len(cases))
	}
	round(pods, serve)
	round(pods, wholes)
	s, w := make([]float64, rounds), make([]float64, rounds)
	for i := range rounds {
		s[i] = round(pods, serve)
		w[i] = round(pods, wholes)
	}
	r.ServeUs, r.WholeUs = median(s), median(w)
	out, _ := json.Marshal(r)
	fmt.Println(string(out))
}
