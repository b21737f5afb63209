package abi

// HTTPRequest is what a guest asks ImportHTTPRequest to send. Bodies are text
// in ABI v1: a binary body cannot be sent or received (invalid UTF-8 reaches
// the other side as U+FFFD).
type HTTPRequest struct {
	// Method is the HTTP method; empty means GET.
	Method string `json:"method,omitempty"`
	// URL is absolute, http or https; its host must be one the plugin is
	// allowed, as must every host a redirect leads to.
	URL string `json:"url"`
	// Headers are sent as given, one value each.
	Headers map[string]string `json:"headers,omitempty"`
	// Body is sent as the request's body; empty sends none.
	Body string `json:"body,omitempty"`
}

// HTTPResponse is ImportHTTPRequest's answer: the final response, after any
// redirects. A status of 4xx or 5xx is a response like any other, not an
// error: the guest decides what it means.
type HTTPResponse struct {
	Status int `json:"status"`
	// Headers are the response's headers in canonical form
	// ("Content-Type"), several values of one header joined with ", ".
	Headers map[string]string `json:"headers,omitempty"`
	// Body is the whole body as text, at most the host's response size
	// limit (a larger response is an error, never a truncated body).
	Body string `json:"body"`
}
