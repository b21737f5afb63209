module github.com/morphhost/morph/guests/go/pdk

// Kept at 1.23 or older: TinyGo 0.34 builds only modules of Go 1.19-1.23.
go 1.23

require github.com/morphhost/morph/abi v0.0.0-20261128064946-13dfdd3463f1

replace github.com/morphhost/morph/abi => ../../../abi
