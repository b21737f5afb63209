module github.com/morphhost/morph/guests/testdata/cap_go

go 1.23

require (
	github.com/morphhost/morph/abi v0.0.0-20261128041835-e28cc41caec6
	github.com/morphhost/morph/guests/go/pdk v0.0.0
)

replace (
	github.com/morphhost/morph/abi => ../../../abi
	github.com/morphhost/morph/guests/go/pdk => ../../go/pdk
)
