module github.com/morphhost/morph/guests/extism

// Kept at 1.23 or older so the plugins also build with TinyGo 0.34.
go 1.23

require (
	github.com/extism/go-pdk v1.1.3
	github.com/morphhost/morph/abi v0.0.0-20261128064946-13dfdd3463f1
)

replace github.com/morphhost/morph/abi => ../../abi
