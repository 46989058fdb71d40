package app

import (
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"

	"k8s.io/apiserver/pkg/server/mux"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	kcmcontroller "github.com/kcmclone/kube-controller-manager/pkg/controller"
)

// debugControllersPath serves what every started controller is doing, as
// HTML or, for Accept: application/json, as JSON. It sits behind the
// secure port's authorization, like /metrics.
const debugControllersPath = "/debug/controllers"

// rateSampleInterval is how often queue counters are sampled for the
// per-minute rates while the page is watched; samplingIdleAfter is how long
// after the last view sampling goes on. A sample gathers every registered
// metric (some collectors walk every cached pod), so nothing is sampled
// while nobody looks.
const (
	rateSampleInterval = 10 * time.Second
	samplingIdleAfter  = 5 * time.Minute
)

// controllersPage is /debug/controllers. Controllers report into statuses
// (RunControllers puts each one's status in its context); queue rates come
// from the workqueue_* metrics, labelled by queue name.
type controllersPage struct {
	statuses *kcmcontroller.StatusRegistry
	rates    *queueRates
	clock    clock.WithTicker

	mu sync.Mutex
	// ctx bounds the sampling loop (set by install); sampling tells
	// whether it runs; lastView is when the page was last served.
	ctx      context.Context
	sampling bool
	lastView time.Time
	// shards, in sharded mode, tells who holds each controller.
	shards   shardHolders
	identity string
}

type shardHolders interface {
	Holders() map[string]string
}

func newControllersPage() *controllersPage {
	return &controllersPage{
		statuses: kcmcontroller.NewStatusRegistry(),
		rates:    &queueRates{gather: legacyregistry.DefaultGatherer.Gather},
		clock:    clock.RealClock{},
	}
}

// install mounts the page, unlisted like the other /debug paths; queue
// counters are sampled from the first view until ctx ends or nobody has
// looked for samplingIdleAfter.
func (p *controllersPage) install(ctx context.Context, m *mux.PathRecorderMux) {
	if p == nil || m == nil {
		return
	}
	p.mu.Lock()
	p.ctx = ctx
	p.mu.Unlock()
	m.UnlistedHandle(debugControllersPath, p)
}

// viewed records a view and starts the sampling loop if it is not running.
func (p *controllersPage) viewed(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lastView = now
	if p.sampling || p.ctx == nil {
		return
	}
	p.sampling = true
	go p.sampleWhileWatched(p.ctx)
}

func (p *controllersPage) sampleWhileWatched(ctx context.Context) {
	t := p.clock.NewTicker(rateSampleInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			p.mu.Lock()
			p.sampling = false
			p.mu.Unlock()
			return
		case now := <-t.C():
			p.mu.Lock()
			idle := now.Sub(p.lastView) >= samplingIdleAfter
			if idle {
				p.sampling = false
				// Samples this old would pass for a rate over the idle
				// gap. Dropped under p.mu, so a view racing this stop
				// cannot lose the sample it takes to the reset.
				p.rates.reset()
			}
			p.mu.Unlock()
			if idle {
				return
			}
			p.rates.sample(now)
		}
	}
}

func (p *controllersPage) setSharded(identity string, shards shardHolders) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.identity, p.shards = identity, shards
}

// controllersView is the page's JSON.
type controllersView struct {
	Time    time.Time `json:"time"`
	Sharded bool      `json:"sharded"`
	// Identity is this replica's, in sharded mode.
	Identity    string           `json:"identity,omitempty"`
	Controllers []controllerView `json:"controllers"`
}

type controllerView struct {
	kcmcontroller.ControllerSnapshot
	AddsPerMinute    *float64 `json:"addsPerMinute"`
	RetriesPerMinute *float64 `json:"retriesPerMinute"`
	// Holder and RunsHere are set in sharded mode.
	Holder   *string `json:"holder,omitempty"`
	RunsHere *bool   `json:"runsHere,omitempty"`
}

func (p *controllersPage) view(now time.Time) controllersView {
	p.viewed(now)
	p.rates.sampleIfOlder(now, time.Second)
	v := controllersView{Time: now, Controllers: []controllerView{}}
	p.mu.Lock()
	shards, identity := p.shards, p.identity
	p.mu.Unlock()
	var holders map[string]string
	if shards != nil {
		v.Sharded, v.Identity = true, identity
		holders = shards.Holders()
	}
	for _, s := range p.statuses.Snapshot(now) {
		cv := controllerView{ControllerSnapshot: s}
		cv.AddsPerMinute, cv.RetriesPerMinute = p.rates.perMinute(s.Queues)
		if holders != nil {
			h := holders[s.Name]
			here := h == identity
			cv.Holder, cv.RunsHere = &h, &here
		}
		v.Controllers = append(v.Controllers, cv)
	}
	return v
}

func (p *controllersPage) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	v := p.view(p.clock.Now())
	if strings.Contains(r.Header.Get("Accept"), "application/json") {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(v); err != nil {
			klog.FromContext(r.Context()).V(4).Info("Writing /debug/controllers failed", "err", err)
		}
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := controllersTemplate.Execute(w, v); err != nil {
		klog.FromContext(r.Context()).V(4).Info("Writing /debug/controllers failed", "err", err)
	}
}

// queueRates turns the workqueue_adds_total and workqueue_retries_total
// counters into per-minute rates over the last minute.
type queueRates struct {
	gather func() ([]*dto.MetricFamily, error)

	mu      sync.Mutex
	samples []counterSample
}

type counterSample struct {
	at      time.Time
	adds    map[string]float64
	retries map[string]float64
}

func (q *queueRates) reset() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.samples = nil
}

func (q *queueRates) sampleIfOlder(now time.Time, age time.Duration) {
	q.mu.Lock()
	fresh := len(q.samples) > 0 && now.Sub(q.samples[len(q.samples)-1].at) < age
	q.mu.Unlock()
	if !fresh {
		q.sample(now)
	}
}

func (q *queueRates) sample(now time.Time) {
	families, err := q.gather()
	if err != nil && len(families) == 0 {
		return
	}
	s := counterSample{at: now, adds: map[string]float64{}, retries: map[string]float64{}}
	for _, f := range families {
		var into map[string]float64
		switch f.GetName() {
		case "workqueue_adds_total":
			into = s.adds
		case "workqueue_retries_total":
			into = s.retries
		default:
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "name" {
					into[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.samples = append(q.samples, s)
	// Keep one sample older than a minute as the base of the window.
	for len(q.samples) > 2 && now.Sub(q.samples[1].at) >= time.Minute {
		q.samples = q.samples[1:]
	}
}

// perMinute returns the queues' summed add and retry rates over the last
// minute (or since the first sample); nil when unknown.
func (q *queueRates) perMinute(queues []string) (adds, retries *float64) {
	if len(queues) == 0 {
		return nil, nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.samples) < 2 {
		return nil, nil
	}
	last := q.samples[len(q.samples)-1]
	base := q.samples[0]
	for _, s := range q.samples[1:] {
		if last.at.Sub(s.at) < time.Minute {
			break
		}
		base = s
	}
	elapsed := last.at.Sub(base.at).Minutes()
	if elapsed <= 0 {
		return nil, nil
	}
	rate := func(now, then map[string]float64) *float64 {
		d := 0.0
		for _, name := range queues {
			// A counter restarts with a rebuilt queue (sharded hand-over).
			d += max(now[name]-then[name], 0)
		}
		r := d / elapsed
		return &r
	}
	return rate(last.adds, base.adds), rate(last.retries, base.retries)
}

func ago(now time.Time, t time.Time) string {
	d := now.Sub(t)
	switch {
	case d < time.Second:
		return "just now"
	case d < time.Hour:
		return d.Truncate(time.Second).String() + " ago"
	default:
		return d.Truncate(time.Minute).String() + " ago"
	}
}

var controllersTemplate = template.Must(template.New("controllers").Funcs(template.FuncMap{
	"ago": func(now time.Time, t any) string {
		switch t := t.(type) {
		case time.Time:
			return ago(now, t)
		case *time.Time:
			if t != nil {
				return ago(now, *t)
			}
		}
		return "—"
	},
	"stamp": func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"rate": func(f *float64) string {
		if f == nil {
			return "—"
		}
		return strings.TrimSuffix(fmt.Sprintf("%.1f", *f), ".0")
	},
	"seconds": func(f float64) string {
		return time.Duration(f * float64(time.Second)).Truncate(time.Millisecond).String()
	},
	"join": func(q []string) string { return strings.Join(q, ", ") },
	// deref reads the optional fields, nil pointers as their zero value.
	"deref": func(v any) any {
		rv := reflect.ValueOf(v)
		if rv.Kind() != reflect.Pointer {
			return v
		}
		if rv.IsNil() {
			return reflect.Zero(rv.Type().Elem()).Interface()
		}
		return rv.Elem().Interface()
	},
}).Parse(controllersHTML))

const controllersHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>kube-controller-manager: controllers</title>
<style>
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #1d1d1f; }
h1 { font-size: 1.3em; margin: 0 0 .2em; }
p.meta { color: #666; margin: 0 0 1em; font-size: .9em; }
table { border-collapse: collapse; width: 100%; font-size: .85em; }
th, td { border-bottom: 1px solid #ddd; padding: .35em .5em; text-align: left; vertical-align: top; }
th { background: #f4f5f7; position: sticky; top: 0; white-space: nowrap; }
td.name b, td.holder { white-space: nowrap; }
td.name .key { display: inline-block; max-width: 22em; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.stopped td { color: #999; }
.ok { color: #1a7f37; font-weight: 600; }
.bad { color: #cf222e; font-weight: 600; }
td.err { color: #cf222e; min-width: 22em; max-width: 40em; overflow-wrap: anywhere; }
.key { font-family: ui-monospace, monospace; }
.muted { color: #888; }
</style>
</head>
<body>
<h1>Controllers</h1>
<p class="meta">{{len .Controllers}} controllers · {{stamp .Time}}{{if .Sharded}} · sharded, this replica: <span class="key">{{.Identity}}</span>{{end}} · <a href="?">refresh</a></p>
<table>
<thead><tr>
<th>Controller</th>{{if .Sharded}}<th>Held by</th>{{end}}<th>Workers</th><th>Queue depth</th><th>Adds/min</th><th>Retries/min</th>
<th>Longest running sync</th><th>Last success</th><th>Last error</th><th>Informers synced</th>
</tr></thead>
<tbody>
{{- $now := .Time}}{{$sharded := .Sharded}}
{{- range .Controllers}}
<tr{{if not .Running}} class="stopped"{{end}}>
<td class="name"><b>{{.Name}}</b>{{if .Queues}}<br><span class="muted key">{{join .Queues}}</span>{{end}}</td>
{{- if $sharded}}<td class="holder">{{if .RunsHere}}{{if deref .RunsHere}}<span class="ok">this replica</span>{{else if deref .Holder}}<span class="key">{{deref .Holder}}</span>{{else}}<span class="muted">free</span>{{end}}{{end}}</td>{{end}}
<td class="num">{{if .Running}}{{.Workers}}{{else}}—{{end}}</td>
<td class="num">{{if .QueueDepth}}{{deref .QueueDepth}}{{else}}—{{end}}</td>
<td class="num">{{rate .AddsPerMinute}}</td>
<td class="num">{{rate .RetriesPerMinute}}</td>
<td>{{with .LongestSync}}<span class="key">{{.Key}}</span> for {{seconds .Seconds}}{{else}}—{{end}}</td>
<td>{{ago $now .LastSuccess}}</td>
<td class="err">{{with .LastError}}<span class="muted">{{ago $now .Time}}</span> <span class="key">{{.Key}}</span>: {{.Message}}{{else}}<span class="muted">—</span>{{end}}</td>
<td>{{if .InformersSynced}}{{if deref .InformersSynced}}<span class="ok">yes</span>{{else}}<span class="bad">no</span>{{end}}{{else}}<span class="muted">—</span>{{end}}</td>
</tr>
{{- end}}
</tbody>
</table>
</body>
</html>
`
