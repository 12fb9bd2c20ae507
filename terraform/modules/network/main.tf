# Network: a VPC with public subnets (the runner tasks, with public IPs, and the NAT) and
# private subnets (the functions and the database). Runner tasks fetch pages straight through
# the internet gateway, so crawled bytes pay no NAT processing; their security group admits
# nothing inbound. The functions reach the internet (AWS APIs, Lambda crawls) through NAT: NAT
# gateways, or one NAT instance (a t4g.nano forwarding and masquerading, for stacks whose
# functions only call AWS APIs). An S3 gateway endpoint keeps item writes off NAT.

variable "name" {
  description = "Name prefix."
  type        = string
}

variable "cidr" {
  description = "VPC CIDR block."
  type        = string
}

variable "az_count" {
  description = "Number of availability zones."
  type        = number
}

variable "single_nat_gateway" {
  description = "One shared NAT gateway instead of one per zone (nat_instance false)."
  type        = bool
}

variable "nat_instance" {
  description = "One NAT instance in the first public subnet instead of NAT gateways."
  type        = bool
}

variable "nat_instance_type" {
  description = "Instance type of the NAT instance (Graviton: the AMI is arm64)."
  type        = string
}

data "aws_availability_zones" "available" {
  state = "available"
}

locals {
  azs       = slice(data.aws_availability_zones.available.names, 0, var.az_count)
  nat_count = var.nat_instance ? 0 : (var.single_nat_gateway ? 1 : var.az_count)
}

resource "aws_vpc" "this" {
  cidr_block           = var.cidr
  enable_dns_support   = true
  enable_dns_hostnames = true # RDS Proxy and interface endpoints resolve through VPC DNS
  tags                 = { Name = var.name }
}

resource "aws_internet_gateway" "this" {
  vpc_id = aws_vpc.this.id
  tags   = { Name = var.name }
}

resource "aws_subnet" "public" {
  count             = var.az_count
  vpc_id            = aws_vpc.this.id
  availability_zone = local.azs[count.index]
  cidr_block        = cidrsubnet(var.cidr, 8, count.index)
  tags              = { Name = "${var.name}-public-${local.azs[count.index]}" }
}

resource "aws_subnet" "private" {
  count             = var.az_count
  vpc_id            = aws_vpc.this.id
  availability_zone = local.azs[count.index]
  cidr_block        = cidrsubnet(var.cidr, 4, count.index + 1)
  tags              = { Name = "${var.name}-private-${local.azs[count.index]}" }
}

resource "aws_route_table" "public" {
  vpc_id = aws_vpc.this.id
  tags   = { Name = "${var.name}-public" }
}

resource "aws_route" "public_internet" {
  route_table_id         = aws_route_table.public.id
  destination_cidr_block = "0.0.0.0/0"
  gateway_id             = aws_internet_gateway.this.id
}

resource "aws_route_table_association" "public" {
  count          = var.az_count
  subnet_id      = aws_subnet.public[count.index].id
  route_table_id = aws_route_table.public.id
}

resource "aws_eip" "nat" {
  count  = local.nat_count
  domain = "vpc"
  tags   = { Name = "${var.name}-nat-${count.index}" }
}

resource "aws_nat_gateway" "this" {
  count         = local.nat_count
  allocation_id = aws_eip.nat[count.index].id
  subnet_id     = aws_subnet.public[count.index].id
  tags          = { Name = "${var.name}-${count.index}" }

  depends_on = [aws_internet_gateway.this]
}

resource "aws_route_table" "private" {
  count  = var.az_count
  vpc_id = aws_vpc.this.id
  tags   = { Name = "${var.name}-private-${local.azs[count.index]}" }
}

resource "aws_route" "private_nat" {
  count                  = var.az_count
  route_table_id         = aws_route_table.private[count.index].id
  destination_cidr_block = "0.0.0.0/0"
  nat_gateway_id         = var.nat_instance ? null : aws_nat_gateway.this[var.single_nat_gateway ? 0 : count.index].id
  network_interface_id   = var.nat_instance ? aws_instance.nat[0].primary_network_interface_id : null
}

# The NAT instance: Amazon Linux 2023 (arm64, the latest at the first apply; replace the instance
# to move on: `terraform apply -replace=module.network.aws_instance.nat[0]`), forwarding and
# masquerading the VPC's traffic out of its public address, as AWS documents NAT instances.
# EC2's simplified automatic recovery (on by default for t4g) moves it to healthy hardware after
# a host failure, keeping its address; the root module alarms on its status checks. It applies
# security updates itself (dnf-automatic).
data "aws_ssm_parameter" "nat_ami" {
  count = var.nat_instance ? 1 : 0
  name  = "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-arm64"
}

resource "aws_security_group" "nat" {
  count       = var.nat_instance ? 1 : 0
  name        = "${var.name}-nat"
  description = "crawlq NAT instance: forwards the VPC's outbound traffic"
  vpc_id      = aws_vpc.this.id
  tags        = { Name = "${var.name}-nat" }
}

resource "aws_vpc_security_group_ingress_rule" "nat_from_vpc" {
  count             = var.nat_instance ? 1 : 0
  security_group_id = aws_security_group.nat[0].id
  description       = "Traffic of the private subnets to forward"
  ip_protocol       = "-1"
  cidr_ipv4         = var.cidr
}

resource "aws_vpc_security_group_egress_rule" "nat_all" {
  count             = var.nat_instance ? 1 : 0
  security_group_id = aws_security_group.nat[0].id
  description       = "Forwarded traffic to the internet"
  ip_protocol       = "-1"
  cidr_ipv4         = "0.0.0.0/0"
}

resource "aws_instance" "nat" {
  count                  = var.nat_instance ? 1 : 0
  ami                    = data.aws_ssm_parameter.nat_ami[0].value
  instance_type          = var.nat_instance_type
  subnet_id              = aws_subnet.public[0].id
  vpc_security_group_ids = [aws_security_group.nat[0].id]
  source_dest_check      = false # it forwards packets that are not its own
  metadata_options {
    http_tokens = "required"
  }
  root_block_device {
    volume_type = "gp3"
    volume_size = 8
    encrypted   = true
  }
  user_data = <<-EOT
    #!/bin/bash
    set -euo pipefail
    # The address is associated once the instance runs: retry until the repositories answer.
    for i in $(seq 60); do dnf install -y iptables-services dnf-automatic && break; sleep 10; done
    rpm -q iptables-services dnf-automatic
    echo 'net.ipv4.ip_forward = 1' > /etc/sysctl.d/90-crawlq-nat.conf
    sysctl --system
    iface=$(ip -o -4 route show to default | awk '{print $5}')
    iptables -t nat -A POSTROUTING -o "$iface" -s ${var.cidr} -j MASQUERADE
    iptables -F FORWARD
    service iptables save
    systemctl enable --now iptables
    sed -i 's/^apply_updates = .*/apply_updates = yes/; s/^upgrade_type = .*/upgrade_type = security/' /etc/dnf/automatic.conf
    systemctl enable --now dnf-automatic.timer
  EOT
  tags      = { Name = "${var.name}-nat" }

  lifecycle {
    ignore_changes = [ami]
  }
}

# The instance owns its network interface, so destroying the instance removes it (a separate
# interface outlived the instance on the emulator and blocked the destroy). A replaced instance
# gets a new interface and address, and the private routes follow it in the same apply.
resource "aws_eip" "nat_instance" {
  count    = var.nat_instance ? 1 : 0
  domain   = "vpc"
  instance = aws_instance.nat[0].id
  tags     = { Name = "${var.name}-nat" }

  depends_on = [aws_internet_gateway.this]
}

resource "aws_route_table_association" "private" {
  count          = var.az_count
  subnet_id      = aws_subnet.private[count.index].id
  route_table_id = aws_route_table.private[count.index].id
}

# The functions: no inbound, outbound anywhere (they crawl the web and call AWS).
resource "aws_security_group" "app" {
  name        = "${var.name}-app"
  description = "crawlq functions"
  vpc_id      = aws_vpc.this.id
  tags        = { Name = "${var.name}-app" }
}

resource "aws_vpc_security_group_egress_rule" "app_all" {
  security_group_id = aws_security_group.app.id
  description       = "Crawling the web, AWS APIs and the database"
  ip_protocol       = "-1"
  cidr_ipv4         = "0.0.0.0/0"
}

# The runner tasks sit in public subnets with public IPs: this group has no ingress rule at all,
# so nothing on the internet (or in the VPC) can open a connection to them.
resource "aws_security_group" "runner" {
  name        = "${var.name}-runner"
  description = "crawlq runner tasks in public subnets: no inbound"
  vpc_id      = aws_vpc.this.id
  tags        = { Name = "${var.name}-runner" }
}

resource "aws_vpc_security_group_egress_rule" "runner_all" {
  security_group_id = aws_security_group.runner.id
  description       = "Crawling the web, AWS APIs and the database proxy"
  ip_protocol       = "-1"
  cidr_ipv4         = "0.0.0.0/0"
}

data "aws_region" "current" {}

# Item writes and image layer pulls (ECR keeps layers in S3) go to S3 without NAT processing.
resource "aws_vpc_endpoint" "s3" {
  vpc_id            = aws_vpc.this.id
  service_name      = "com.amazonaws.${data.aws_region.current.name}.s3"
  vpc_endpoint_type = "Gateway"
  route_table_ids   = concat([aws_route_table.public.id], aws_route_table.private[*].id)
  tags              = { Name = "${var.name}-s3" }
}

output "nat_instance_id" {
  description = "The NAT instance's id; empty with NAT gateways."
  value       = var.nat_instance ? aws_instance.nat[0].id : ""
}

output "vpc_id" {
  value = aws_vpc.this.id
}

output "private_subnet_ids" {
  value = aws_subnet.private[*].id
}

output "public_subnet_ids" {
  value = aws_subnet.public[*].id
}

output "runner_security_group_id" {
  value = aws_security_group.runner.id
}

output "app_security_group_id" {
  value = aws_security_group.app.id
}
