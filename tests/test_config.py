import json

import pytest

from reportgen.config import builtin_data_problem, builtin_examples, json_schema, load_config
from reportgen.errors import EXIT_CONFIG, ConfigError
from tests.helpers import write_config


def test_defaults_without_a_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = load_config()
    assert config.model == "default" and config.device == "auto"
    assert config.output == tmp_path / "site"
    assert config.examples == builtin_examples()


def test_builtin_examples_include_the_store_pair():
    examples = builtin_examples()
    assert len(examples) >= 12
    assert sum(e.pair is not None for e in examples) >= 4 and sum(e.pair is None for e in examples) >= 4
    assert any(e.text == "I went to the store." and e.pair == "At the store, I bought fresh strawberries."
               for e in examples)


def test_user_values_override_defaults_and_paths_are_relative_to_the_file(tmp_path):
    (tmp_path / "models" / "mine").mkdir(parents=True)
    path = write_config(tmp_path, "title: My report\nmodel: models/mine\noutput: out\n"
                                  "examples:\n  - text: Hello there.\n    pair: General Kenobi.\n")
    config = load_config(path)
    assert config.title == "My report"
    assert config.output == tmp_path / "out"
    assert config.model == str((tmp_path / "models" / "mine").resolve())
    assert config.examples[0].pair == "General Kenobi."
    assert config.max_length == 512  # from the shipped defaults


@pytest.mark.parametrize("text, expected", [
    ("titel: typo\n", "unknown key 'titel'"),
    ("examples:\n  - text: hi\n    colour: red\n", "unknown key 'examples.0.colour'"),
    ("device: tpu\n", "field 'device'"),
    ("max_length: many\n", "field 'max_length'"),
    ("title: [unclosed\n", "invalid YAML at line"),
    ("", "the file is empty"),
    ("- a\n- b\n", "expected a mapping"),
    ("examples: []\n", None),  # valid YAML and schema; the build refuses it (tested in test_build)
])
def test_bad_configs_name_the_file_and_the_field(tmp_path, text, expected):
    path = write_config(tmp_path, text)
    if expected is None:
        assert load_config(path).examples == []
        return
    with pytest.raises(ConfigError) as err:
        load_config(path)
    message = str(err.value)
    assert message.startswith(f"{path}: ") and expected in message
    assert "\n" not in message and err.value.exit_code == EXIT_CONFIG


def test_missing_config_file(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.yaml")


def test_schema_lists_every_key_with_its_default():
    schema = json.loads(json_schema())
    assert schema["additionalProperties"] is False
    props = schema["properties"]
    assert {"title", "model", "device", "examples", "output", "site_url"} <= set(props)
    assert props["device"]["default"] == "auto" and "source" not in props


def test_the_builtin_demo_set_serves_only_the_similarity_task(tmp_path):
    assert builtin_data_problem("similarity") is None  # the same rule tasks.load_task applies
    path = write_config(tmp_path, "ablation:\n  task: mlm\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value) == (f"{path}: field 'ablation.data': {builtin_data_problem('mlm')} "
                              "(or set ablation.enabled: false)")
    write_config(tmp_path, "ablation:\n  task: mlm\n  enabled: false\n")
    assert load_config(path).ablation.task == "mlm"  # nothing runs, so nothing needs the data


def test_a_tilde_means_the_home_directory_for_every_path(tmp_path, monkeypatch):
    """`output: ~/site` once made a folder literally named `~` in the project (issue 27)."""
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    monkeypatch.setenv("HOME", str(home))
    config_file = project / "reportgen.yaml"
    config_file.write_text("output: ~/my-site\ncache_dir: ~/.cache/reportgen\n"
                           "patterns: {corpus: [{path: ~/texts.txt}]}\n", encoding="utf-8")
    config = load_config(config_file)
    assert config.output == home / "my-site" and config.cache_dir == home / ".cache" / "reportgen"
    assert config.patterns.corpus[0].path == home / "texts.txt"
    assert not any("~" in str(path) for path in (config.output, config.cache_dir))


def test_base_dir_is_neither_in_the_schema_nor_a_key_a_file_may_set(tmp_path):
    """`reportgen schema` listed base_dir, and a file's base_dir was silently ignored (issue 27)."""
    schema = json.loads(json_schema())
    assert not {"base_dir", "source"} & set(schema["properties"])
    config = write_config(tmp_path, "base_dir: /elsewhere\n")
    with pytest.raises(ConfigError) as caught:
        load_config(config)
    assert str(caught.value) == (f"{config}: unknown key 'base_dir' (paths are relative to the config file's "
                                 "folder)") and caught.value.exit_code == EXIT_CONFIG


def test_yaml_merge_keys_merge_and_a_mappings_own_keys_override_them(tmp_path):
    """`<<: *anchor` (YAML's merge key) works as YAML says; before, it was refused with a parser-internal message
    ("could not determine a constructor for the tag 'tag:yaml.org,2002:merge'")."""
    path = write_config(tmp_path, "examples:\n  - &one {text: the cat sat., name: one}\n"
                                  "  - <<: *one\n    name: two\n"
                                  "ablation:\n  <<: {enabled: false, seeds: [1, 2]}\n  seeds: [3]\n")
    config = load_config(path)
    assert [(e.name, e.text) for e in config.examples] == [("one", "the cat sat."), ("two", "the cat sat.")]
    assert config.ablation.enabled is False and config.ablation.seeds == [3]


def test_a_key_written_twice_beside_a_merge_key_is_still_refused(tmp_path):
    path = write_config(tmp_path, "examples:\n  - &one {text: the cat sat.}\n"
                                  "  - <<: *one\n    name: two\n    name: three\n")
    with pytest.raises(ConfigError, match="key 'name' is written twice in one mapping, at lines 4 and 5"):
        load_config(path)
