module github.com/toolaudit/toolaudit/resolveclient

go 1.22
