// wiw-promql: Prometheus's own rule-file validator, PromQL parser, scrape parser and query engine
// for the tests (test/observability.test.ts, test/node-e2e.test.ts), built from Go modules by
// scripts/provide-promql.sh. Every command reads and writes JSON, so the tests judge the chart's
// rules and dashboard with the code Prometheus runs rather than with a look-alike.
//
//	wiw-promql rules FILE...  each file as Prometheus loads a rule file (unknown fields refused,
//	                          expressions and annotation templates parsed); prints the groups with
//	                          the metric names each rule's expression selects
//	wiw-promql exprs          stdin: ["expr", ...]; prints [{"metrics": [...]}, ...] in that order
//	wiw-promql eval           stdin: {"scrapes": [{"timeMs", "labels", "contentType", "body"}],
//	                          "expr", "timeMs"}; ingests each scrape as the scrape loop does (target
//	                          labels added, clashing exposed labels renamed exported_*) and prints
//	                          the instant query's result as [{"labels": {...}, "value": v}]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"sort"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/model/textparse"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/tsdb"
)

// The parser Prometheus uses with its default feature flags: no experimental functions.
var promqlParser = parser.NewParser(parser.Options{})

func main() {
	if len(os.Args) < 2 {
		fail(errors.New("usage: wiw-promql rules FILE... | exprs | eval"))
	}
	var err error
	switch os.Args[1] {
	case "rules":
		err = rules(os.Args[2:])
	case "exprs":
		err = exprs()
	case "eval":
		err = eval()
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "wiw-promql:", err)
	os.Exit(1)
}

func emit(v any) error {
	return json.NewEncoder(os.Stdout).Encode(v)
}

// metricNames lists the metric names an expression selects, sorted and without repeats.
func metricNames(expr parser.Expr) []string {
	seen := map[string]bool{}
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		if vs, ok := node.(*parser.VectorSelector); ok {
			name := vs.Name
			for _, m := range vs.LabelMatchers {
				if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
					name = m.Value
				}
			}
			seen[name] = true
		}
		return nil
	})
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

type ruleOut struct {
	Alert       string            `json:"alert,omitempty"`
	Record      string            `json:"record,omitempty"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Metrics     []string          `json:"metrics"`
}

type groupOut struct {
	Name  string    `json:"name"`
	Rules []ruleOut `json:"rules"`
}

func rules(files []string) error {
	if len(files) == 0 {
		return errors.New("rules: no file given")
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	var out []groupOut
	var problems []error
	for _, file := range files {
		groups, errs := rulefmt.ParseFile(file, false, model.LegacyValidation, promqlParser, logger)
		if len(errs) > 0 {
			problems = append(problems, errs...)
			continue
		}
		for _, g := range groups.Groups {
			group := groupOut{Name: g.Name, Rules: []ruleOut{}}
			for _, r := range g.Rules {
				expr, err := promqlParser.ParseExpr(r.Expr)
				if err != nil {
					return err // rulefmt parsed it already
				}
				rule := ruleOut{
					Alert: r.Alert, Record: r.Record, Expr: r.Expr,
					Labels: r.Labels, Annotations: r.Annotations, Metrics: metricNames(expr),
				}
				if r.For != 0 {
					rule.For = r.For.String()
				}
				group.Rules = append(group.Rules, rule)
			}
			out = append(out, group)
		}
	}
	if len(problems) > 0 {
		return errors.Join(problems...)
	}
	return emit(out)
}

func exprs() error {
	var in []string
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil {
		return fmt.Errorf("exprs: stdin is not a JSON array of strings: %w", err)
	}
	type exprOut struct {
		Metrics []string `json:"metrics"`
	}
	out := make([]exprOut, 0, len(in))
	var problems []error
	for i, text := range in {
		expr, err := promqlParser.ParseExpr(text)
		if err != nil {
			problems = append(problems, fmt.Errorf("expression %d %q: %w", i, text, err))
			continue
		}
		out = append(out, exprOut{Metrics: metricNames(expr)})
	}
	if len(problems) > 0 {
		return errors.Join(problems...)
	}
	return emit(out)
}

type scrape struct {
	TimeMs      int64             `json:"timeMs"`
	Labels      map[string]string `json:"labels"`
	ContentType string            `json:"contentType"`
	Body        string            `json:"body"`
}

type evalIn struct {
	Scrapes []scrape `json:"scrapes"`
	Expr    string   `json:"expr"`
	TimeMs  int64    `json:"timeMs"`
}

type sampleOut struct {
	Labels map[string]string `json:"labels"`
	Value  float64           `json:"value"`
}

func eval() error {
	var in evalIn
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil {
		return fmt.Errorf("eval: bad input: %w", err)
	}
	dir, err := os.MkdirTemp("", "wiw-promql-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	opts := tsdb.DefaultOptions()
	// Samples arrive in one go, possibly hours apart: one wide head block, nothing compacted.
	opts.MinBlockDuration = int64(24 * time.Hour / time.Millisecond)
	opts.MaxBlockDuration = opts.MinBlockDuration
	db, err := tsdb.Open(dir, nil, nil, opts, tsdb.NewDBStats())
	if err != nil {
		return err
	}
	defer db.Close()
	for i, s := range in.Scrapes {
		if err := ingest(db, s); err != nil {
			return fmt.Errorf("scrape %d: %w", i, err)
		}
	}
	engine := promql.NewEngine(promql.EngineOpts{
		Logger: slog.New(slog.DiscardHandler), MaxSamples: 1e7, Timeout: time.Minute,
		LookbackDelta: 5 * time.Minute, Parser: promqlParser,
	})
	query, err := engine.NewInstantQuery(context.Background(), db, nil, in.Expr, time.UnixMilli(in.TimeMs))
	if err != nil {
		return err
	}
	defer query.Close()
	res := query.Exec(context.Background())
	if res.Err != nil {
		return res.Err
	}
	return emit(resultSamples(res))
}

func resultSamples(res *promql.Result) []sampleOut {
	out := []sampleOut{}
	switch v := res.Value.(type) {
	case promql.Vector:
		for _, s := range v {
			out = append(out, sampleOut{Labels: s.Metric.Map(), Value: s.F})
		}
	case promql.Scalar:
		out = append(out, sampleOut{Labels: map[string]string{}, Value: v.V})
	}
	for i := range out {
		if math.IsNaN(out[i].Value) || math.IsInf(out[i].Value, 0) {
			// JSON has no NaN or Inf; a query the tests send never yields one on purpose.
			out[i].Labels["__value__"] = fmt.Sprint(out[i].Value)
			out[i].Value = 0
		}
	}
	return out
}

// ingest appends one scrape as Prometheus's scrape loop would: parsed by the same textparse parser,
// target labels added, an exposed label that clashes with one renamed exported_<name>.
func ingest(db *tsdb.DB, s scrape) error {
	contentType := s.ContentType
	if contentType == "" {
		contentType = "text/plain; version=0.0.4"
	}
	p, err := textparse.New([]byte(s.Body), contentType, labels.NewSymbolTable(),
		textparse.ParserOptions{FallbackContentType: "text/plain"})
	if err != nil && p == nil {
		return err
	}
	app := db.Appender(context.Background())
	for {
		entry, err := p.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			_ = app.Rollback()
			return err
		}
		if entry != textparse.EntrySeries {
			continue
		}
		_, ts, v := p.Series()
		var exposed labels.Labels
		p.Labels(&exposed)
		t := s.TimeMs
		if ts != nil {
			t = *ts
		}
		if _, err := app.Append(0, withTarget(exposed, s.Labels), t, v); err != nil {
			_ = app.Rollback()
			return err
		}
	}
	return app.Commit()
}

func withTarget(exposed labels.Labels, target map[string]string) labels.Labels {
	b := labels.NewBuilder(labels.EmptyLabels())
	exposed.Range(func(l labels.Label) {
		if _, clash := target[l.Name]; clash {
			b.Set("exported_"+l.Name, l.Value)
		} else {
			b.Set(l.Name, l.Value)
		}
	})
	for name, value := range target {
		b.Set(name, value)
	}
	return b.Labels()
}
