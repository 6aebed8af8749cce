module rocketmq-rs/bench/routeload

go 1.22
