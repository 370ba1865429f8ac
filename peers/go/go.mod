module ringside/srv-go

go 1.22
