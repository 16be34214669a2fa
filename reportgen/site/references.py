"""The references page: a full citation, with a link where the work has a stable one, for every method the
site uses and every work its pages cite by name ("Clark et al. 2019"), so a reader can check each claim's method.

`cite` is the short form the pages write; a test reads every page of a built site for citations of that form
and asserts each is listed here. `used_for` says in a few words where the site uses it.
"""

from __future__ import annotations

from dataclasses import dataclass

PAGE = "references.md"


@dataclass(frozen=True)
class Reference:
    id: str  # the anchor on the page
    cite: str  # as the pages cite it: "Clark et al. 2019"
    full: str  # authors (year). title. venue.
    url: str | None  # a DOI, arXiv or publisher address; None where the work has no stable one
    used_for: str


REFERENCES: tuple[Reference, ...] = (
    # Attention patterns and what they mean
    Reference("clark2019", "Clark et al. 2019",
              "Clark, K., Khandelwal, U., Levy, O. and Manning, C. D. (2019). What Does BERT Look At? An Analysis "
              "of BERT's Attention. BlackboxNLP workshop at ACL 2019.", "https://arxiv.org/abs/1906.04341",
              "the encoder patterns and their thresholds, attention entropy, head similarity (Jensen-Shannon)"),
    Reference("voita2019", "Voita et al. 2019",
              "Voita, E., Talbot, D., Moiseev, F., Sennrich, R. and Titov, I. (2019). Analyzing Multi-Head "
              "Self-Attention: Specialized Heads Do the Heavy Lifting, the Rest Can Be Pruned. ACL 2019.",
              "https://arxiv.org/abs/1905.09418", "the argmax test for positional heads"),
    Reference("kovaleva2019", "Kovaleva et al. 2019",
              "Kovaleva, O., Romanov, A., Rogers, A. and Rumshisky, A. (2019). Revealing the Dark Secrets of BERT. "
              "EMNLP-IJCNLP 2019.", "https://arxiv.org/abs/1908.08593", "the kinds of attention pattern"),
    Reference("kobayashi2020", "Kobayashi et al. 2020",
              "Kobayashi, G., Kuribayashi, T., Yokoi, S. and Inui, K. (2020). Attention is Not Only a Weight: "
              "Analyzing Transformers with Vector Norms. EMNLP 2020.", "https://arxiv.org/abs/2004.10102",
              "contributions (a weight times the length of the value vector it moves)"),
    Reference("olsson2022", "Olsson et al. 2022",
              "Olsson, C., Elhage, N., Nanda, N., Joseph, N., DasSarma, N., Henighan, T. et al. (2022). In-context "
              "Learning and Induction Heads. Transformer Circuits Thread.", "https://arxiv.org/abs/2209.11895",
              "the induction test on repeated random tokens"),
    Reference("xiao2023", "Xiao et al. 2023",
              "Xiao, G., Tian, Y., Chen, B., Han, S. and Lewis, M. (2023). Efficient Streaming Language Models with "
              "Attention Sinks. arXiv:2309.17453 (ICLR 2024).", "https://arxiv.org/abs/2309.17453",
              "the attention sink"),
    Reference("jain2019", "Jain and Wallace 2019",
              "Jain, S. and Wallace, B. C. (2019). Attention is not Explanation. NAACL 2019.",
              "https://arxiv.org/abs/1902.10186", "the limits of reading attention weights as explanations"),
    Reference("wiegreffe2019", "Wiegreffe and Pinter 2019",
              "Wiegreffe, S. and Pinter, Y. (2019). Attention is not not Explanation. EMNLP-IJCNLP 2019.",
              "https://arxiv.org/abs/1908.04626", "the limits of reading attention weights as explanations"),
    Reference("vig2019", "Vig 2019",
              "Vig, J. (2019). A Multiscale Visualization of Attention in the Transformer Model. ACL 2019 System "
              "Demonstrations.", "https://arxiv.org/abs/1906.05714", "the head and model views' design"),
    # Masking heads
    Reference("michel2019", "Michel et al. 2019",
              "Michel, P., Levy, O. and Neubig, G. (2019). Are Sixteen Heads Really Better than One? NeurIPS 2019.",
              "https://arxiv.org/abs/1905.10650", "masking a head (its output set to zero) and head importance"),
    # Statistics
    Reference("efron1993", "Efron and Tibshirani 1993",
              "Efron, B. and Tibshirani, R. J. (1993). An Introduction to the Bootstrap. Chapman and Hall.",
              "https://doi.org/10.1201/9780429246593", "bootstrap confidence intervals, paired over examples"),
    Reference("davison1997", "Davison and Hinkley 1997",
              "Davison, A. C. and Hinkley, D. V. (1997). Bootstrap Methods and their Application. Cambridge "
              "University Press.", "https://doi.org/10.1017/CBO9780511802843",
              "permutation p-values, (1 + at least as extreme) / (1 + permutations)"),
    Reference("holm1979", "Holm 1979",
              "Holm, S. (1979). A Simple Sequentially Rejective Multiple Test Procedure. Scandinavian Journal of "
              "Statistics 6(2), 65-70.", "https://www.jstor.org/stable/4615733",
              "the correction for testing many heads, layers or fractions at once"),
    Reference("maurer1995", "Maurer, Hothorn and Lehmacher 1995",
              "Maurer, W., Hothorn, L. A. and Lehmacher, W. (1995). Multiple comparisons in drug clinical trials "
              "and preclinical assays: a-priori ordered hypotheses. In Vollmar, J. (ed.), Biometrie in der "
              "chemisch-pharmazeutischen Industrie 6, 3-18. Gustav Fischer.", None,
              "the fixed-sequence non-inferiority test over growing fractions of masked heads"),
    Reference("lin1991", "Lin 1991",
              "Lin, J. (1991). Divergence Measures Based on the Shannon Entropy. IEEE Transactions on Information "
              "Theory 37(1), 145-151.", "https://doi.org/10.1109/18.61115", "the Jensen-Shannon divergence"),
    Reference("torgerson1952", "Torgerson 1952",
              "Torgerson, W. S. (1952). Multidimensional Scaling: I. Theory and Method. Psychometrika 17, 401-419.",
              "https://doi.org/10.1007/BF02288916", "placing heads on the similarity map (classical MDS, the start)"),
    Reference("deleeuw1977", "de Leeuw 1977",
              "de Leeuw, J. (1977). Applications of Convex Analysis to Multidimensional Scaling. In Barra, J. R. "
              "et al. (eds.), Recent Developments in Statistics, 133-145. North-Holland.", None,
              "placing heads on the similarity map (SMACOF, the refinement)"),
    Reference("gorodkin2004", "Gorodkin 2004",
              "Gorodkin, J. (2004). Comparing Two K-category Assignments by a K-category Correlation Coefficient. "
              "Computational Biology and Chemistry 28(5-6), 367-374.",
              "https://doi.org/10.1016/j.compbiolchem.2004.09.006", "MCC for more than two labels"),
    # Activation patching (issue 49)
    Reference("wang2022", "Wang et al. 2022",
              "Wang, K., Variengien, A., Conmy, A., Shlegeris, B. and Steinhardt, J. (2022). Interpretability in the "
              "Wild: a Circuit for Indirect Object Identification in GPT-2 small. ICLR 2023.",
              "https://arxiv.org/abs/2211.00593",
              "activation patching of heads and the logit difference; mean ablation"),
    Reference("chan2022", "Chan et al. 2022",
              "Chan, L., Garriga-Alonso, A., Goldowsky-Dill, N., Greenblatt, R., Nitishinskaya, J., "
              "Radhakrishnan, A., Shlegeris, B. and Thomas, N. (2022). Causal Scrubbing: a Method for Rigorously "
              "Testing Interpretability Hypotheses. Alignment Forum.",
              "https://www.alignmentforum.org/posts/JvZhhzycHu2Yd57RN", "resample ablation"),
    Reference("meng2022", "Meng et al. 2022",
              "Meng, K., Bau, D., Andonian, A. and Belinkov, Y. (2022). Locating and Editing Factual Associations in "
              "GPT. NeurIPS 2022.", "https://arxiv.org/abs/2202.05262",
              "causal tracing: restoring one part of a clean run inside a corrupted one"),
    Reference("nanda2023", "Nanda 2023",
              "Nanda, N. (2023). Attribution Patching: Activation Patching At Industrial Scale.",
              "https://www.neelnanda.io/mechanistic-interpretability/attribution-patching",
              "attribution patching: every head's effect from one backward pass"),
    Reference("kramar2024", "Kramár et al. 2024",
              "Kramár, J., Lieberum, T., Shah, R. and Nanda, N. (2024). AtP*: An Efficient and Scalable Method for "
              "Localizing LLM Behaviour to Components.", "https://arxiv.org/abs/2403.00745",
              "attribution patching's agreement with exact patching; exact patching of its top heads"),
    Reference("zhang2024", "Zhang and Nanda 2024",
              "Zhang, F. and Nanda, N. (2024). Towards Best Practices of Activation Patching in Language Models: "
              "Metrics and Methods. ICLR 2024.", "https://arxiv.org/abs/2309.16042",
              "the logit difference and its normalisation"),
    # Pictures
    Reference("brewer2003", "Brewer, Hatchard and Harrower 2003",
              "Brewer, C. A., Hatchard, G. W. and Harrower, M. A. (2003). ColorBrewer in Print: A Catalog of Color "
              "Schemes for Maps. Cartography and Geographic Information Science 30(1), 5-32.",
              "https://colorbrewer2.org/", "the blues of an example's entropy map"),
    Reference("okabe2008", "Okabe and Ito 2008",
              "Okabe, M. and Ito, K. (2008). Color Universal Design (CUD): How to Make Figures and Presentations "
              "That Are Friendly to Colorblind People.", "https://jfly.uni-koeln.de/color/",
              "the head labels' colours"),
)
