// Package sandbox is what a plugin may reach outside its own memory, and
// the code that holds it to that: its Grants (directories, environment
// variables, HTTP hosts; deny by default) made ready at load into a
// Sandbox, which both of host's loaders apply to every instance.
//
//   - grants.go: Grants and their validation, the capability report
//     (Sandbox.Capabilities), and Sandbox itself: New opens the granted
//     directories, reads the granted environment and builds the HTTP
//     client once, so what a guest can reach cannot change under it;
//     Configure gives an instance's wazero module config the directories
//     and environment.
//   - rootfs.go: a granted directory as a WASI file system confined to it
//     with os.Root (wazero's own mounts are not a jail).
//   - http.go: the HTTP capability (Sandbox.HTTP), the one place where a
//     guest's request is checked against the allowed hosts, on every
//     redirect hop and at the dialer.
//
// host defines its own Grants and PathGrant, documented for its users,
// and converts them to these at load; it re-exports the errors under their
// own names. This package knows nothing of plugins, loaders or the ABI's calls.
package sandbox
