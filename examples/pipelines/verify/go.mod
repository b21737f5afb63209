module github.com/morphhost/morph/examples/pipelines/verify

// Kept at 1.23 or older so the example also builds with TinyGo 0.34.
go 1.23

require (
	github.com/morphhost/morph/abi v0.0.0-20261128064946-13dfdd3463f1
	github.com/morphhost/morph/guests/go/pdk v0.0.0
)

replace (
	github.com/morphhost/morph/abi => ../../../abi
	github.com/morphhost/morph/guests/go/pdk => ../../../guests/go/pdk
)
