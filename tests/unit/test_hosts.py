import json

import pytest

from reprokit.errors import UserError
from reprokit.cluster.hosts import HostSpec, load, parse


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
    (["a:99999"], "hosts.json: host #1: port '99999' is not a number from 1 to 65535"),
    (["a:x"], "hosts.json: host #1: port 'x' is not a number"),
    ([{"host": "a", "port": 0}], "hosts.json: host #1: port 0 is not a number from 1 to 65535"),
    ([{"host": "a", "pasword": "x"}], "hosts.json: host #1: unknown key(s) 'pasword'; allowed:"),
    ({"hosts": ["a"], "timeout": 3}, "hosts.json: unknown key(s) 'timeout'"),
    ([{"port": 22}], "hosts.json: host #1: missing the 'host' key"),
    ([42], "hosts.json: host #1: expected a host name or an object, got int"),
    (["a;rm -rf /"], "hosts.json: host #1: host 'a;rm -rf /' is not a host name"),
    ([{"host": "a", "user": "$(id)"}], "hosts.json: host #1: user '$(id)' has characters that are not allowed"),
    ([{"host": "a", "workers": -1}], "hosts.json: host #1: workers must be a whole number >= 0, got -1"),
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
    with pytest.raises(UserError, match="cannot read"):
        load(str(tmp_path / "missing.json"))
    good = tmp_path / "good.json"
    good.write_text(json.dumps(["x", "y"]))
    assert load(str(good)).names == ["x", "y"]
