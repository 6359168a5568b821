package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"deepinfer/grammars"
	"deepinfer/serve"
)

// serveCmd runs the OpenAI-compatible server until SIGTERM or SIGINT, then drains it.
func serveCmd(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	model := fs.String("model", "", "model directory with the checkpoint (for plans compiled from one; default $DEEPINFER_HF_MODEL_DIR)")
	tokDir := fs.String("tokenizer", "", "directory with tokenizer.json (default: the model dir's, then the fetched one)")
	host := fs.String("host", "127.0.0.1", "address to listen on")
	port := fs.Int("port", 8000, "port to listen on (0: any free port, printed)")
	name := fs.String("served-model-name", "", "model id clients use (default: the plan's model type)")
	seqs := fs.Int("max-num-seqs", 64, "sequences running at once")
	batchTokens := fs.Int("max-num-batched-tokens", 2048, "tokens per engine step (chunked prefill budget)")
	maxLen := fs.Int("max-model-len", 0, "longest prompt plus output a request may have (0: the model's)")
	queue := fs.Int("max-queue", 0, "requests waiting to start before 429 (0: 4 × max-num-seqs)")
	defMax := fs.Int("default-max-tokens", 256, "max_tokens of a request that sets none")
	grace := fs.Duration("shutdown-grace", 30*time.Second, "how long in-flight requests may run after SIGTERM")
	quiet := fs.Bool("quiet", false, "no per-request log lines")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError{Err: fmt.Errorf("serve takes one plan file")}
	}
	if *seqs < 1 || *batchTokens < 1 || *maxLen < 0 || *queue < 0 || *defMax < 1 || *port < 0 || *port > 65535 {
		return usageError{Err: fmt.Errorf("--max-num-seqs, --max-num-batched-tokens and --default-max-tokens must be positive, --port in [0, 65535]")}
	}
	p, m, dir, sc, err := openPlan(pos[0], *model, *batchTokens, 0)
	if err != nil {
		return err
	}
	defer m.Close()
	tok, err := chooseTokenizer(p, dir, *tokDir)
	if err != nil {
		return err
	}
	o := serve.Options{Machine: m, Tokenizer: tok, ModelName: *name, MaxNumSeqs: *seqs, MaxBatchTokens: *batchTokens,
		MaxQueue: *queue, MaxModelLen: *maxLen, DefaultMaxTokens: *defMax, Spec: sc.spec}
	if o.ModelName == "" {
		o.ModelName = p.ModelType
	}
	if !*quiet {
		o.Log = os.Stderr
	}
	if src, ok := tok.(grammars.TokenSource); ok {
		o.Grammars = grammars.NewCompiler(grammars.VocabFrom(src, p.Model.Vocab), grammars.Options{})
	}
	srv, err := serve.New(o)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(*host, fmt.Sprint(*port)))
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 1 << 20}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	fmt.Fprintf(stdout, "divm serve: %s on http://%s (model %q; /v1/chat/completions, /v1/completions, /v1/models, /health, /metrics)\n",
		pos[0], ln.Addr(), o.ModelName)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	fmt.Fprintf(os.Stderr, "divm serve: draining (new requests get 503; in-flight ones have %s)\n", *grace)
	gctx, cancel := context.WithTimeout(context.Background(), *grace)
	defer cancel()
	derr := srv.Drain(gctx)
	sctx, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	if derr != nil {
		fmt.Fprintf(os.Stderr, "divm serve: the grace period ended; requests still running were cancelled\n")
	}
	fmt.Fprintf(os.Stderr, "divm serve: stopped\n")
	return nil
}
