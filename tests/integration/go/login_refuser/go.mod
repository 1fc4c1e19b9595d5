module gateway/tests/login_refuser

go 1.26.0
