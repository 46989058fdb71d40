package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/apiserver/pkg/server/mux"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	kcmcontroller "github.com/kcmclone/kube-controller-manager/pkg/controller"
)

func counterFamily(name string, perQueue map[string]float64) *dto.MetricFamily {
	f := &dto.MetricFamily{Name: ptr.To(name)}
	for q, v := range perQueue {
		f.Metric = append(f.Metric, &dto.Metric{
			Label:   []*dto.LabelPair{{Name: ptr.To("name"), Value: ptr.To(q)}},
			Counter: &dto.Counter{Value: ptr.To(v)},
		})
	}
	return f
}

func TestQueueRatesPerMinute(t *testing.T) {
	adds, retries := 0.0, 0.0
	r := &queueRates{gather: func() ([]*dto.MetricFamily, error) {
		return []*dto.MetricFamily{
			counterFamily("workqueue_adds_total", map[string]float64{"q": adds, "other": 1000}),
			counterFamily("workqueue_retries_total", map[string]float64{"q": retries}),
		}, nil
	}}
	if a, _ := r.perMinute([]string{"q"}); a != nil {
		t.Fatalf("rate without samples = %v, want unknown", *a)
	}
	t0 := time.Now()
	r.sample(t0)
	adds, retries = 30, 3
	r.sample(t0.Add(30 * time.Second))
	a, re := r.perMinute([]string{"q"})
	if a == nil || *a != 60 || re == nil || *re != 6 {
		t.Fatalf("after 30s: adds %v retries %v, want 60 and 6 per minute", a, re)
	}
	// Past a minute the window slides: the base is the newest sample at
	// least a minute old.
	adds = 90
	r.sample(t0.Add(90 * time.Second))
	if a, _ := r.perMinute([]string{"q"}); a == nil || *a != 60 {
		t.Fatalf("sliding window: adds %v, want 60 per minute", a)
	}
}

type fakeHolders map[string]string

func (f fakeHolders) Holders() map[string]string { return f }

func TestControllersPage(t *testing.T) {
	p := newControllersPage()
	p.rates.gather = func() ([]*dto.MetricFamily, error) { return nil, nil }
	st := p.statuses.Controller("job-controller")
	st.Start(time.Now())
	q := kcmcontroller.NewNamedQueue("")
	defer q.ShutDown()
	loop := kcmcontroller.WorkLoop[string]{Name: "job", Queue: q, Sync: func(context.Context, string) error {
		return errors.New("pods \"x\" is forbidden: <quota>")
	}}
	q.Add("ns/j")
	loop.ProcessNextWorkItem(kcmcontroller.WithStatus(context.Background(), st))
	kcmcontroller.ReportQueue(kcmcontroller.WithStatus(context.Background(), st), "job", q.Len)

	get := func(accept string) (*httptest.ResponseRecorder, string) {
		req := httptest.NewRequest(http.MethodGet, debugControllersPath, nil)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		rec := httptest.NewRecorder()
		p.ServeHTTP(rec, req)
		return rec, rec.Body.String()
	}

	rec, body := get("application/json")
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type = %q", ct)
	}
	var v controllersView
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Controllers) != 1 || v.Sharded {
		t.Fatalf("view = %s", body)
	}
	c := v.Controllers[0]
	if c.Name != "job-controller" || !c.Running || c.LastError == nil || c.LastError.Key != "ns/j" || c.QueueDepth == nil || c.Holder != nil {
		t.Fatalf("controller = %s", body)
	}

	rec, body = get("text/html")
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		t.Fatalf("Content-Type = %q", ct)
	}
	for _, want := range []string{"<table>", "job-controller", "ns/j", "is forbidden: &lt;quota&gt;"} {
		if !strings.Contains(body, want) {
			t.Errorf("HTML lacks %q:\n%s", want, body)
		}
	}

	p.setSharded("me", fakeHolders{"job-controller": "other"})
	_, body = get("application/json")
	v = controllersView{}
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatal(err)
	}
	if c := v.Controllers[0]; !v.Sharded || v.Identity != "me" || c.Holder == nil || *c.Holder != "other" || c.RunsHere == nil || *c.RunsHere {
		t.Fatalf("sharded view = %s", body)
	}
	if _, body = get(""); !strings.Contains(body, "Held by") || !strings.Contains(body, "other") {
		t.Errorf("sharded HTML lacks the holder:\n%s", body)
	}
}

// eventually polls cond until it holds; the test fails if it never does.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for i := 0; i < 3000; i++ {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

// A sample gathers every metric, so the page samples only while it is
// watched: nothing before the first view, every interval after it, and
// nothing again once nobody has looked for samplingIdleAfter.
func TestControllersPageSamplesOnlyWhileWatched(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Now())
	var gathers atomic.Int32
	p := newControllersPage()
	p.clock = fc
	p.rates.gather = func() ([]*dto.MetricFamily, error) {
		gathers.Add(1)
		return nil, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p.install(ctx, mux.NewPathRecorderMux("test"))
	sampling := func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.sampling
	}

	// Installed, not viewed: no loop and no ticker.
	if sampling() || fc.HasWaiters() || gathers.Load() != 0 {
		t.Fatalf("before any view: sampling %v, ticker %v, gathers %d", sampling(), fc.HasWaiters(), gathers.Load())
	}

	view := func() {
		rec := httptest.NewRecorder()
		p.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, debugControllersPath, nil))
	}
	view()
	if got := gathers.Load(); got != 1 {
		t.Fatalf("a view gathered %d times, want 1", got)
	}
	eventually(t, "the sampling ticker", fc.HasWaiters)

	// Every tick within samplingIdleAfter of the view samples.
	ticks := int(samplingIdleAfter / rateSampleInterval)
	for i := 1; i < ticks; i++ {
		fc.Step(rateSampleInterval)
		want := int32(1 + i)
		eventually(t, fmt.Sprintf("sample %d", want), func() bool { return gathers.Load() == want })
	}
	if a, _ := p.rates.perMinute([]string{"q"}); a == nil {
		t.Fatal("no rate while watched")
	}
	// The tick at samplingIdleAfter ends the loop without a sample. (The
	// fake clock keeps stopped tickers, so Waiters counts tickers made.)
	fc.Step(rateSampleInterval)
	eventually(t, "sampling to stop", func() bool { return !sampling() })
	if got, want := gathers.Load(), int32(ticks); got != want {
		t.Fatalf("gathers after going idle = %d, want %d", got, want)
	}
	if a, _ := p.rates.perMinute([]string{"q"}); a != nil {
		t.Fatalf("rate after going idle = %v, want unknown (no stale samples)", *a)
	}

	// Idle: further ticks sample nothing. A new view starts it again.
	fc.Step(rateSampleInterval)
	view()
	if got, want := gathers.Load(), int32(ticks)+1; got != want {
		t.Fatalf("gathers after an idle tick and a view = %d, want %d (the view's only)", got, want)
	}
	eventually(t, "sampling to restart", func() bool { return sampling() && fc.Waiters() == 2 })
	fc.Step(rateSampleInterval)
	eventually(t, "a sample after the restart", func() bool { return gathers.Load() == int32(ticks)+2 })

	cancel()
	eventually(t, "sampling to end with the context", func() bool { return !sampling() })
}
