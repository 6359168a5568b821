package serve

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"deepinfer/vm"
)

// metrics are the server's Prometheus series (GET /metrics).
type metrics struct {
	reg        *prometheus.Registry
	requests   *prometheus.CounterVec
	duration   *prometheus.HistogramVec
	ttft       prometheus.Histogram
	itl        prometheus.Histogram
	promptToks prometheus.Counter
	genToks    prometheus.Counter
}

func newMetrics(e *vm.Engine, capacity float64) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "deepinfer_requests_total",
		Help: "HTTP requests by endpoint and status code."}, []string{"endpoint", "status"})
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "deepinfer_request_duration_seconds",
		Help: "Time from a request's arrival to its last byte.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 16)}, []string{"endpoint"})
	m.ttft = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "deepinfer_time_to_first_token_seconds",
		Help: "Time from a request's arrival to its first generated token.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)})
	m.itl = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "deepinfer_inter_token_latency_seconds",
		Help: "Time between consecutive generated tokens of one sequence.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)})
	m.promptToks = prometheus.NewCounter(prometheus.CounterOpts{Name: "deepinfer_prompt_tokens_total", Help: "Prompt tokens of finished requests."})
	m.genToks = prometheus.NewCounter(prometheus.CounterOpts{Name: "deepinfer_generation_tokens_total", Help: "Generated tokens (their rate is the output tokens/s)."})
	stat := func(f func(vm.Stats) float64) func() float64 { return func() float64 { return f(e.Stats()) } }
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), m.requests, m.duration, m.ttft, m.itl, m.promptToks, m.genToks,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "deepinfer_queue_depth", Help: "Requests waiting to start."},
			stat(func(s vm.Stats) float64 { return float64(s.Queued) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "deepinfer_running_sequences", Help: "Sequences in the running batch."},
			stat(func(s vm.Stats) float64 { return float64(s.Running) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "deepinfer_kv_tokens", Help: "Positions the running sequences hold in their state."},
			stat(func(s vm.Stats) float64 { return float64(s.HeldTokens) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "deepinfer_kv_usage_ratio", Help: "kv_tokens over max_num_seqs × max_model_len."},
			stat(func(s vm.Stats) float64 { return float64(s.HeldTokens) / capacity })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "deepinfer_grammar_mask_seconds_total", Help: "Time spent computing grammar token masks."},
			stat(func(s vm.Stats) float64 { return s.MaskTime.Seconds() })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "deepinfer_engine_steps_total", Help: "Engine steps run."},
			stat(func(s vm.Stats) float64 { return float64(s.Steps) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "deepinfer_engine_tokens_total", Help: "Tokens (prompt and generated) the engine's steps carried."},
			stat(func(s vm.Stats) float64 { return float64(s.Tokens) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "deepinfer_engine_async_steps_total", Help: "Engine steps enqueued before the step before them was back (the async scheduler)."},
			stat(func(s vm.Stats) float64 { return float64(s.AsyncSteps) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "deepinfer_engine_hidden_seconds_total", Help: "Host time the engine spent while a step ran on the device, outside waiting for it."},
			stat(func(s vm.Stats) float64 { return s.Hidden.Seconds() })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "deepinfer_spec_groups_total", Help: "Speculative verify groups run."},
			func() float64 { return float64(e.SpecStats().Groups) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "deepinfer_spec_drafted_tokens_total", Help: "Draft tokens verified."},
			func() float64 { return float64(e.SpecStats().Drafted) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "deepinfer_spec_accepted_tokens_total", Help: "Draft tokens accepted."},
			func() float64 { return float64(e.SpecStats().Accepted) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "deepinfer_spec_target_rows_total", Help: "Target rows run for verify groups, rollback rebuilds included."},
			func() float64 { s := e.SpecStats(); return float64(s.VerifyRows + s.ReplayRows) }),
	)
	return m
}
