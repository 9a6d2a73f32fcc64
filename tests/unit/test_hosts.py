import json
import os
import re

import pytest

from reprokit.cluster.hosts import HostSpec, check_description, load, parse
from reprokit.cluster.ssh import resolve
from reprokit.core.errors import UserError


def test_original_format_is_a_list_of_names_with_optional_ports():
    cfg = parse(["chifflet-2", "chifflet-4:2222", "10.0.0.7"])
    assert cfg.hosts == [HostSpec("chifflet-2"), HostSpec("chifflet-4", port=2222), HostSpec("10.0.0.7")]
    assert (cfg.ssh_config, cfg.known_hosts, cfg.accept_new_host_keys) == (None, None, False)


def test_rich_format_with_options():
    cfg = parse({"hosts": [{"host": "a", "port": 22, "user": "me", "identity_file": "~/.ssh/k", "interface": "eth0",
                            "workers": 2, "servers": 0, "python": "/opt/mx/bin/python"}],
                 "known_hosts": "/tmp/kh", "accept_new_host_keys": True})
    assert cfg.hosts[0] == HostSpec("a", 22, "me", "~/.ssh/k", "eth0", 2, 0, "/opt/mx/bin/python")
    assert (cfg.known_hosts, cfg.accept_new_host_keys) == ("/tmp/kh", True)
    assert parse([{"host": "b"}]).hosts == [HostSpec("b")]


@pytest.mark.parametrize("data,message", [
    ([], "hosts.json: the list of hosts is empty"),
    ({"hosts": []}, "hosts.json: the list of hosts is empty"),
    ("a", "hosts.json: expected a JSON list of hosts"),
    (["a", "b", "a"], "hosts.json: host #3 (a) duplicates host #1"),
    (["a:99999"], "hosts.json: host #1.port must be a port number from 1 to 65535, got '99999'"),
    (["a:x"], "hosts.json: host #1.port must be a port number from 1 to 65535, got 'x'"),
    ([{"host": "a", "port": 0}], "hosts.json: host #1.port must be a port number from 1 to 65535, got 0"),
    ([{"host": "a", "pasword": "x"}], "hosts.json: host #1 has unknown key(s) 'pasword'; known:"),
    ({"hosts": ["a"], "timeout": 3}, "hosts.json has unknown key(s) 'timeout'"),
    ([{"port": 22}], "hosts.json: host #1 has no 'host'"),
    ([42], "hosts.json: host #1: expected a host name or an object, got int"),
    (["a;rm -rf /"], "hosts.json: host #1.host must be a host name or address, got 'a;rm -rf /'"),
    ([{"host": "a", "user": "$(id)"}], "hosts.json: host #1.user must be a user name (letters, digits, '.', '_', '-'), got '$(id)'"),
    ([{"host": "a", "workers": -1}], "hosts.json: host #1.workers must be from 0 to 100000, got -1"),
    ({"hosts": ["a"], "accept_new_host_keys": "yes"}, "accept_new_host_keys must be true or false"),
])
def test_malformed_configs_are_refused_saying_what_and_where(data, message):
    with pytest.raises(UserError) as err:
        parse(data)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_load_names_the_file_when_it_is_not_json(tmp_path):
    bad = tmp_path / "hosts.json"
    bad.write_text("[\"a\",")
    with pytest.raises(UserError, match=rf"{bad} is not valid JSON"):
        load(str(bad))
    with pytest.raises(UserError, match="missing.json does not exist"):
        load(str(tmp_path / "missing.json"))
    good = tmp_path / "good.json"
    good.write_text(json.dumps(["x", "y"]))
    assert load(str(good)).names == ["x", "y"]


# Allocations of batch schedulers: OAR/PBS node files and Slurm hostlists, in place of the 'hosts' list.

def test_oar_nodefile_one_line_per_core_gives_each_host_once_with_its_slots(tmp_path):
    nodefile = tmp_path / "oar-nodefile"
    nodefile.write_text("chifflet-2.lille.grid5000.fr\n" * 4 + "chifflet-4.lille.grid5000.fr\n" * 4)
    cfg = parse({"nodefile": str(nodefile), "user": "me", "interface": "ib0", "known_hosts": "/tmp/kh"})
    assert cfg.hosts == [HostSpec("chifflet-2.lille.grid5000.fr", user="me", interface="ib0", slots=4),
                         HostSpec("chifflet-4.lille.grid5000.fr", user="me", interface="ib0", slots=4)]
    assert cfg.known_hosts == "/tmp/kh"
    assert cfg.allocation == f"nodefile {nodefile}"


def test_pbs_nodefile_keeps_first_appearance_order_and_counts_scattered_slots(tmp_path):
    nodefile = tmp_path / "pbs-nodefile"
    nodefile.write_text("n07\nn03\n\nn07\n  n03  \nn07\n")  # PBS may interleave; blank lines are nothing
    cfg = parse({"nodefile": str(nodefile)})
    assert [(h.host, h.slots) for h in cfg.hosts] == [("n07", 3), ("n03", 2)]


def test_slurm_hostlist_expression_is_expanded(tmp_path):
    cfg = parse({"hostlist": "node[01-04,07],gpu[1-2]", "workers": 2, "python": "/opt/mx/bin/python"})
    assert cfg.names == ["node01", "node02", "node03", "node04", "node07", "gpu1", "gpu2"]
    assert all(h.workers == 2 and h.python == "/opt/mx/bin/python" and h.slots is None for h in cfg.hosts)


def test_allocation_named_by_environment_references_follows_the_environment(tmp_path):
    first, second = tmp_path / "job1", tmp_path / "job2"
    first.write_text("a\na\n")
    second.write_text("b\nc\n")
    data = {"nodefile": "$OAR_NODEFILE"}
    assert parse(data, environ={"OAR_NODEFILE": str(first)}).names == ["a"]
    assert parse(data, environ={"OAR_NODEFILE": str(second)}).names == ["b", "c"]
    assert parse({"hostlist": "${SLURM_JOB_NODELIST}"}, environ={"SLURM_JOB_NODELIST": "n[1-2]"}).names == ["n1", "n2"]


def test_expanded_allocation_round_trips_as_a_plain_description(tmp_path):
    nodefile = tmp_path / "nodes"
    nodefile.write_text("x\nx\ny\n")
    cfg = parse({"nodefile": str(nodefile), "port": 2222, "accept_new_host_keys": True})
    assert parse(json.loads(json.dumps(cfg.to_data()))) == parse(cfg.to_data())
    assert parse(cfg.to_data()).hosts == cfg.hosts and parse(cfg.to_data()).accept_new_host_keys


@pytest.mark.parametrize("data,environ,message", [
    ({"nodefile": "/nonexistent/oar-nodefile"}, {},
     "hosts.json: nodefile /nonexistent/oar-nodefile does not exist; is the allocation still running?"),
    ({"nodefile": "$OAR_NODEFILE"}, {},
     "hosts.json: nodefile refers to $OAR_NODEFILE, which is not set here; run inside the allocation"),
    ({"hostlist": "$SLURM_JOB_NODELIST"}, {"SLURM_JOB_NODELIST": " "}, "refers to $SLURM_JOB_NODELIST, which is not set"),
    ({"hostlist": "node[01-"}, {}, "hosts.json: hostlist 'node[01-' is not a Slurm hostlist expression (unbalanced"),
    ({"hostlist": "node[09-01]"}, {}, "hostlist 'node[09-01]' is not a Slurm hostlist expression"),
    ({"hostlist": "n[1-999999999]"}, {}, "hostlist 'n[1-999999999]' is not a Slurm hostlist expression"),
    ({"hostlist": "a;rm -rf ~"}, {}, "hostlist 'a;rm -rf ~' gives 'a;rm -rf ~', which is not a host name"),
    ({"hostlist": ""}, {}, "hosts.json: hostlist must be a non-empty string"),
    ({"hostlist": ["a"]}, {}, "hosts.json: hostlist must be text, got ['a']"),
    ({"hostlist": "a", "hosts": ["b"]}, {}, "give one of 'hosts', 'nodefile' and 'hostlist', not both 'hosts' and"),
    ({"hostlist": "a", "nodefile": "/x"}, {}, "not both 'nodefile' and 'hostlist'"),
    ({"hostlist": "a", "host": "b"}, {}, "hosts.json has unknown key(s) 'host'"),
    ({"hostlist": "a", "user": "$(id)"}, {}, "hosts.json: hostlist: host #1.user must be a user name"),
    ({"user": "me"}, {}, "hosts.json has unknown key(s) 'user'"),
])
def test_bad_allocations_are_one_clear_line(data, environ, message):
    with pytest.raises(UserError) as err:
        parse(data, environ=environ)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("content,message", [
    ("", "lists no host; an OAR or PBS node file has one host name per line"),
    ("\n  \n", "lists no host"),
    ("node1\nnode2 slots=4\n", "line 2 'node2 slots=4' is not a host name or address"),
    ("node1\n$(touch /tmp/x)\n", "line 2 '$(touch /tmp/x)' is not a host name"),
])
def test_bad_nodefiles_are_one_clear_line_naming_the_file(tmp_path, content, message):
    nodefile = tmp_path / "nodefile"
    nodefile.write_text(content)
    with pytest.raises(UserError) as err:
        parse({"nodefile": str(nodefile)}, source="machine:g5k")
    assert str(err.value).startswith(f"machine:g5k: nodefile {nodefile}")
    assert message in str(err.value) and "\n" not in str(err.value)


def test_unreadable_nodefile_is_one_clear_line(tmp_path):
    with pytest.raises(UserError, match=rf"nodefile {tmp_path} is a folder, not a regular file"):
        parse({"nodefile": str(tmp_path)})
    binary = tmp_path / "nodes"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(UserError, match=r"is not text \(UTF-8\)"):
        parse({"nodefile": str(binary)})


def test_yaml_description_has_the_same_keys(tmp_path):
    described = tmp_path / "cluster.yaml"
    described.write_text("# the nodes of my allocation\nhosts:\n  - host: node1\n    port: 2222\n    user: me\n"
                         "  - node2\nknown_hosts: ~/.ssh/known_hosts\naccept_new_host_keys: true\n")
    cfg = load(str(described))
    assert cfg.hosts == [HostSpec("node1", port=2222, user="me"), HostSpec("node2")]
    assert (cfg.known_hosts, cfg.accept_new_host_keys) == ("~/.ssh/known_hosts", True)
    slurm = tmp_path / "slurm.yml"
    slurm.write_text("hostlist: $SLURM_JOB_NODELIST\ninterface: ib0\n")
    assert load(str(slurm), environ={"SLURM_JOB_NODELIST": "c[1-3]"}).names == ["c1", "c2", "c3"]


@pytest.mark.parametrize("text,message", [
    ("hosts: [node1\n", "cluster.yaml is not valid YAML at line 2, column 1"),
    ("", "cluster.yaml is empty"),
    ("hosts:\n  - host: node1\n    pasword: x\n", "host #1 has unknown key(s) 'pasword'"),
    ("- !!python/object/apply:os.system ['touch /tmp/x']\n", "is not valid YAML"),  # safe_load: no objects
])
def test_bad_yaml_descriptions_are_one_clear_line(tmp_path, text, message):
    described = tmp_path / "cluster.yaml"
    described.write_text(text)
    with pytest.raises(UserError) as err:
        load(str(described))
    assert message in str(err.value) and "\n" not in str(err.value)


def test_check_description_leaves_allocations_unexpanded_but_checks_the_rest():
    check_description({"nodefile": "$OAR_NODEFILE", "user": "me"}, "cluster.yaml")  # no allocation exists here
    with pytest.raises(UserError, match="cluster.yaml: nodefile: host #1.user must be a user name"):
        check_description({"nodefile": "$OAR_NODEFILE", "user": "$(id)"}, "cluster.yaml")
    with pytest.raises(UserError, match="cluster.yaml has unknown key\\(s\\) 'nodes'"):
        check_description({"nodefile": "$OAR_NODEFILE", "nodes": 3}, "cluster.yaml")
    with pytest.raises(UserError, match="host #2 \\(a\\) duplicates host #1"):
        check_description(["a", "a"], "cluster.yaml")


def test_node_file_that_is_a_fifo_or_a_device_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "nodefile"
    os.mkfifo(fifo)  # opening it for reading would wait for a writer forever
    with pytest.raises(UserError, match=rf"nodefile {fifo} is a FIFO \(named pipe\), not a regular file"):
        parse({"nodefile": str(fifo)})
    with pytest.raises(UserError, match="nodefile /dev/zero is a character device, not a regular file"):
        parse({"nodefile": "/dev/zero"})


def test_yaml_anchors_and_merge_keys_still_share_options(tmp_path):
    """The bounds on aliases (read_description) leave YAML's own sharing alone: a merge key is no repeated key."""
    described = tmp_path / "cluster.yaml"
    described.write_text("hosts:\n  - &first {host: node1, user: me, interface: eth0}\n"
                         "  - <<: *first\n    host: node2\n")
    assert load(str(described)).hosts == [HostSpec("node1", user="me", interface="eth0"),
                                          HostSpec("node2", user="me", interface="eth0")]


@pytest.mark.parametrize("text,message", [
    ("hosts: [a]\nhosts: [b]\n", "cluster.yaml: line 2: the key 'hosts' is given twice (first at line 1)"),
    ("hosts: [a]\ntrue: x\n", "cluster.yaml: line 2: the key true is not a name"),
    ("hosts: [[[[[[[[[[[[[[[[[[[[[[a]]]]]]]]]]]]]]]]]]]]]\n", "nests deeper than 20 levels"),
])
def test_yaml_keys_are_names_given_once_and_nesting_is_bounded(tmp_path, text, message):
    described = tmp_path / "cluster.yaml"
    described.write_text(text)
    with pytest.raises(UserError, match=re.escape(message)):
        load(str(described))


def test_hosts_json_port_and_user_reach_ssh_configs_proxy_command(tmp_path):
    """ssh_config's %p and %r must expand to what hosts.json says, or the run reaches another sshd (and
    accept-new records that sshd's key under [host]:port)."""
    config = tmp_path / "ssh_config"
    config.write_text("Host node1\n  HostName 10.0.0.1\n  User bob\n  ProxyCommand relay %h %p %r\n")
    cluster = parse({"hosts": [{"host": "node1", "port": 2222, "user": "eve"}], "ssh_config": str(config)}, "t")
    endpoint = resolve(cluster.hosts[0], cluster)
    assert (endpoint.port, endpoint.user, endpoint.label) == (2222, "eve", "node1:2222")
    assert endpoint.proxy_command == "relay 10.0.0.1 2222 eve"
    plain = parse({"hosts": ["node1"], "ssh_config": str(config)}, "t")
    assert resolve(plain.hosts[0], plain).proxy_command == "relay 10.0.0.1 22 bob"  # ssh_config's own, unchanged
