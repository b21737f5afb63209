package oci

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"
	"oras.land/oras-go/v2/registry/remote/errcode"
	"oras.land/oras-go/v2/registry/remote/retry"
)

// DefaultMaxModuleBytes is [wasm.limits] module_mb's default (64 MiB), the
// cap on a layer's claimed size and on the module taken from it.
const DefaultMaxModuleBytes = 64 << 20

// maxManifestBytes caps every manifest and index read (oras-go's default
// MaxMetadataBytes, said here so that the refusal names it).
const maxManifestBytes = 4 << 20

// DefaultTimeout is Options.Timeout's default: how long a registry may stay
// silent (no response headers, or no body bytes) before the request ends.
const DefaultTimeout = 30 * time.Second

// Options configure a Client. The zero value is usable: the user's cache
// directory, module_mb's default, HTTPS only, credentials as `docker login`
// stores them.
type Options struct {
	// CacheDir holds blobs/, modules/ and artifacts/ ([oci] cache_dir);
	// default os.UserCacheDir()/morph/oci.
	CacheDir string
	// MaxModuleBytes refuses a layer claiming more, before it is downloaded,
	// and a module (or tar layer, decompressed) growing past it
	// ([wasm.limits] module_mb); default DefaultMaxModuleBytes.
	MaxModuleBytes int64
	// PlainHTTP lists the registries spoken to over http:// ([oci]
	// plain_http), each as ParsePlainHTTP reads it: HOST, HOST:PORT or
	// HOST:*, e.g. "127.0.0.1:*"; every other registry is HTTPS.
	PlainHTTP []string
	// Timeout is how long a registry may stay silent: for the response
	// headers of a request (its retries included), and between two reads
	// of a body. A registry silent for longer is unreachable (ErrNotCached:
	// a locked digest in the cache still runs). Default DefaultTimeout; it
	// applies to HTTPClient too.
	Timeout time.Duration
	// Offline forbids the network: Fetch serves the cache alone and a
	// manifest not in it is ErrNotCached; Resolve is ErrNotCached.
	Offline bool
	// RelistSignatures makes Fetch of a manifest already in the cache look
	// for its signatures again when online (one referrers request and one
	// .sig tag lookup), so that a signature attached after the manifest
	// entered the cache is found; `morph plugin pull` and `lock` set it,
	// runs do not (they read the cache alone, and Client.Verify lists again
	// only when no signature verifies).
	RelistSignatures bool
	// Credentials answers a registry's challenge; default: the Docker
	// config store as docker login, ORAS and crane read it ($DOCKER_CONFIG
	// or ~/.docker/config.json: auths, credsStore, credHelpers), anonymous
	// for a registry it has nothing for.
	Credentials auth.CredentialFunc
	// HTTPClient carries the requests; default oras-go's retrying client
	// (5xx and 429 retried with backoff). Timeout is added to its
	// transport (the client itself is not changed).
	HTTPClient *http.Client
	// Logger gets a debug line per request kind; default slog.Default().
	Logger *slog.Logger
}

// Client fetches plugins from registries into the cache. It is safe for
// concurrent use.
type Client struct {
	opts      Options
	plainHTTP []PlainHTTPPattern
	cache     cache
	auth      *auth.Client
	log       *slog.Logger
}

// NewClient checks o, fills in its defaults and opens the credential store.
func NewClient(o Options) (*Client, error) {
	if o.CacheDir == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			return nil, fmt.Errorf("oci: no cache directory (set [oci] cache_dir): %w", err)
		}
		o.CacheDir = filepath.Join(dir, "morph", "oci")
	}
	if o.MaxModuleBytes == 0 {
		o.MaxModuleBytes = DefaultMaxModuleBytes
	}
	if o.MaxModuleBytes < 0 {
		return nil, fmt.Errorf("oci: MaxModuleBytes %d is negative", o.MaxModuleBytes)
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Timeout < 0 {
		return nil, fmt.Errorf("oci: Timeout %v is negative", o.Timeout)
	}
	var plain []PlainHTTPPattern
	for _, s := range o.PlainHTTP {
		p, err := ParsePlainHTTP(s)
		if err != nil {
			return nil, fmt.Errorf("oci: %w", err)
		}
		plain = append(plain, p)
	}
	if o.Credentials == nil && !o.Offline {
		store, err := credentials.NewStoreFromDocker(credentials.StoreOptions{})
		if err != nil {
			return nil, fmt.Errorf("oci: reading the Docker credential store ($DOCKER_CONFIG or ~/.docker/config.json): %w", err)
		}
		o.Credentials = credentials.Credential(store)
	}
	if o.HTTPClient == nil {
		o.HTTPClient = retry.DefaultClient
	}
	hc := *o.HTTPClient
	hc.Transport = &stallTransport{next: hc.Transport, timeout: o.Timeout}
	if hc.Transport.(*stallTransport).next == nil {
		hc.Transport.(*stallTransport).next = http.DefaultTransport
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	c := &Client{
		opts:      o,
		plainHTTP: plain,
		cache:     cache{dir: o.CacheDir},
		auth:      &auth.Client{Client: &hc, Credential: o.Credentials, Cache: auth.NewCache()},
		log:       o.Logger,
	}
	c.cache.sweep(o.Logger)
	return c, nil
}

// repository is an oras-go handle on r's repository, over plain HTTP when
// a PlainHTTP pattern matches its registry.
func (c *Client) repository(r Ref) (*remote.Repository, error) {
	host, name := remoteName(r)
	repo, err := remote.NewRepository(host + "/" + name)
	if err != nil {
		return nil, &Error{Ref: r.String(), Kind: ErrBadRef, Err: err}
	}
	repo.Client = c.auth
	repo.PlainHTTP = c.isPlainHTTP(r.Registry)
	repo.MaxMetadataBytes = maxManifestBytes
	repo.ReferrerListMaxPages = maxReferrerPages
	return repo, nil
}

// remoteName is where r's repository is served: as written, except Docker
// Hub, which docker names docker.io but serves at registry-1.docker.io,
// with a one-component repository under library/ (docker.io/alpine is
// registry-1.docker.io/library/alpine), as docker pull maps it.
func remoteName(r Ref) (host, repository string) {
	if r.Registry != "docker.io" && r.Registry != "index.docker.io" {
		return r.Registry, r.Repository
	}
	if !strings.Contains(r.Repository, "/") {
		return "registry-1.docker.io", "library/" + r.Repository
	}
	return "registry-1.docker.io", r.Repository
}

func (c *Client) isPlainHTTP(registry string) bool {
	for _, p := range c.plainHTTP {
		if p.Match(registry) {
			return true
		}
	}
	return false
}

// Resolve asks the registry which manifest r names now, with one HEAD
// request: the tag's when r has one (so that a caller can compare it with
// a locked digest), else the digest's, which proves it exists. A registry
// that cannot be reached, or Offline, is ErrNotCached (a caller with a
// locked digest goes on from the cache); any other failure is returned
// wrapped.
func (c *Client) Resolve(ctx context.Context, r Ref) (string, error) {
	if c.opts.Offline {
		return "", &Error{Ref: r.String(), Kind: ErrNotCached, Err: errors.New("offline: a tag cannot be resolved; use the digest morph.lock records")}
	}
	repo, err := c.repository(r)
	if err != nil {
		return "", err
	}
	name := r.Tag
	if name == "" {
		name = r.Digest
	}
	c.log.DebugContext(ctx, "oci: resolve", "ref", r.String())
	desc, err := repo.Resolve(ctx, name)
	if err != nil {
		return "", c.networkError(ctx, r, "", "resolve", err)
	}
	if err := checkDigest(desc.Digest.String()); err != nil {
		return "", &Error{Ref: r.String(), Kind: ErrRegistry, Err: fmt.Errorf("the registry answered %w", err)}
	}
	return desc.Digest.String(), nil
}

// networkError is ErrNotCached for a registry that cannot be reached or
// stalls past Options.Timeout (so that a caller may fall back on what it
// has), else ErrRegistry naming r and the step. The registry's text in err
// is escaped (registryText); errors.As still reaches err.
func (c *Client) networkError(ctx context.Context, r Ref, d, step string, err error) error {
	err = registryText{err}
	if ctx.Err() == nil && unreachable(err) {
		return &Error{Ref: r.String(), Digest: d, Kind: ErrNotCached,
			Err: fmt.Errorf("%s: registry %s cannot be reached (%w); only what the cache %s holds can be fetched, by digest", step, r.Registry, err, c.opts.CacheDir)}
	}
	hint := ""
	var resp *errcode.ErrorResponse
	if errors.Is(err, auth.ErrBasicCredentialNotFound) || errors.As(err, &resp) && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) {
		hint = fmt.Sprintf("; log in to %s with docker login or oras login (morph reads $DOCKER_CONFIG or ~/.docker/config.json)", r.Registry)
	}
	// net/http's words for it; it has no error type of its own.
	if strings.Contains(err.Error(), "server gave HTTP response to HTTPS client") {
		hint = fmt.Sprintf("; the registry speaks plain HTTP: add %q to [oci] plain_http if that is intended", r.Registry)
	}
	return &Error{Ref: r.String(), Digest: d, Kind: ErrRegistry, Err: fmt.Errorf("%s: %w%s", step, err, hint)}
}

// unreachable tells a failure to connect (refused, no route, no such host,
// dial timeout) or a registry silent past Options.Timeout from an answer
// the registry gave.
func unreachable(err error) bool {
	var op *net.OpError
	var dns *net.DNSError
	return errors.As(err, &op) || errors.As(err, &dns) || errors.Is(err, errStalled)
}

// errStalled: the registry sent nothing for Options.Timeout.
var errStalled = errors.New("the registry sent nothing within the timeout ([oci] timeout)")

// stallTransport ends a request whose response headers, or whose next body
// bytes, do not come within timeout: http.Client.Timeout would also cap a
// large download that is making progress. The error is errStalled, told
// apart from the caller's own cancellation.
type stallTransport struct {
	next    http.RoundTripper
	timeout time.Duration
}

func (t *stallTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(req.Context())
	timer := time.AfterFunc(t.timeout, func() { cancel(errStalled) })
	resp, err := t.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		timer.Stop()
		cancel(nil)
		return nil, stalled(ctx, err)
	}
	resp.Body = &stallBody{body: resp.Body, ctx: ctx, timer: timer, timeout: t.timeout, cancel: cancel}
	return resp, nil
}

// stalled is errStalled (wrapping err) when the transport's own timer
// ended the request.
func stalled(ctx context.Context, err error) error {
	if errors.Is(context.Cause(ctx), errStalled) && !errors.Is(err, errStalled) {
		return fmt.Errorf("%w: %w", errStalled, err)
	}
	return err
}

// stallBody restarts the timer on every read and ends the request when the
// body is closed.
type stallBody struct {
	body    io.ReadCloser
	ctx     context.Context
	timer   *time.Timer
	timeout time.Duration
	cancel  context.CancelCauseFunc
}

func (b *stallBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	if n > 0 {
		b.timer.Reset(b.timeout)
	}
	if err != nil && err != io.EOF {
		err = stalled(b.ctx, err)
	}
	return n, err
}

func (b *stallBody) Close() error {
	b.timer.Stop()
	err := b.body.Close()
	b.cancel(nil)
	return err
}
