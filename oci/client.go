package oci

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"

	"oras.land/oras-go/v2/registry"
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
	// plain_http), as path.Match patterns against host:port, e.g.
	// "127.0.0.1:*"; every other registry is HTTPS.
	PlainHTTP []string
	// Offline forbids the network: Fetch serves the cache alone and a
	// manifest not in it is ErrNotCached; Resolve is ErrNotCached.
	Offline bool
	// RelistSignatures makes Fetch of a manifest already in the cache look
	// for its signatures again when online (one referrers request and one
	// .sig tag lookup), so that a signature attached after the manifest
	// entered the cache is found; `morph plugin pull` and `lock` set it,
	// runs do not (they read the cache alone).
	RelistSignatures bool
	// Credentials answers a registry's challenge; default: the Docker
	// config store as docker login, ORAS and crane read it ($DOCKER_CONFIG
	// or ~/.docker/config.json: auths, credsStore, credHelpers), anonymous
	// for a registry it has nothing for.
	Credentials auth.CredentialFunc
	// HTTPClient carries the requests; default oras-go's retrying client
	// (5xx and 429 retried with backoff).
	HTTPClient *http.Client
	// Logger gets a debug line per request kind; default slog.Default().
	Logger *slog.Logger
}

// Client fetches plugins from registries into the cache. It is safe for
// concurrent use.
type Client struct {
	opts  Options
	cache cache
	auth  *auth.Client
	log   *slog.Logger
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
	for _, p := range o.PlainHTTP {
		if _, err := path.Match(p, ""); err != nil {
			return nil, fmt.Errorf("oci: plain_http pattern %q: %w", p, err)
		}
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
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Client{
		opts:  o,
		cache: cache{dir: o.CacheDir},
		auth:  &auth.Client{Client: o.HTTPClient, Credential: o.Credentials, Cache: auth.NewCache()},
		log:   o.Logger,
	}, nil
}

// repository is an oras-go handle on r's repository, over plain HTTP when
// a PlainHTTP pattern matches its registry.
func (c *Client) repository(r Ref) (*remote.Repository, error) {
	repo, err := remote.NewRepository(r.Registry + "/" + r.Repository)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r, err)
	}
	repo.Client = c.auth
	repo.PlainHTTP = c.plainHTTP(r.Registry)
	repo.MaxMetadataBytes = maxManifestBytes
	return repo, nil
}

func (c *Client) plainHTTP(host string) bool {
	for _, p := range c.opts.PlainHTTP {
		if ok, _ := path.Match(p, host); ok {
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
		return "", fmt.Errorf("%s: the registry answered %w", r, err)
	}
	return desc.Digest.String(), nil
}

// networkError is ErrNotCached for a registry that cannot be reached (so
// that a caller may fall back on what it has), else err wrapped naming r
// and the step.
func (c *Client) networkError(ctx context.Context, r Ref, d, step string, err error) error {
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
	if d != "" && r.Digest == "" {
		return fmt.Errorf("%s@%s: %s: %w%s", r, d, step, err, hint)
	}
	return fmt.Errorf("%s: %s: %w%s", r, step, err, hint)
}

// unreachable tells a failure to connect (refused, no route, no such host,
// dial timeout) from an answer the registry gave.
func unreachable(err error) bool {
	var op *net.OpError
	var dns *net.DNSError
	return errors.As(err, &op) || errors.As(err, &dns)
}

// reference is r's oras-go form naming d.
func reference(r Ref, d string) registry.Reference {
	return registry.Reference{Registry: r.Registry, Repository: r.Repository, Reference: d}
}
