// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.37;

/// Test stand-ins for Circle Gateway's GatewayWallet (source chain) and GatewayMinter (destination
/// chain), written from the facts of docs/gateway-lane.md: the binary TransferSpec / BurnIntent /
/// Attestation encodings, the EIP-712 burn intent (domain {name "GatewayWallet", version "1"}, no
/// chain id, no verifying contract), gatewayBurn signed by the burn signer (EIP-191 over the
/// keccak of its calldata bytes) and gatewayMint signed by the attestation signer (EIP-191 over the
/// keccak of the payload). Single intents and single attestations only (no sets).

interface IGatewayTestToken {
    function transferFrom(address from, address to, uint256 value) external returns (bool);
    function transfer(address to, uint256 value) external returns (bool);
    function burn(uint256 value) external;
    function mint(address to, uint256 value) external;
}

library GatewayCodec {
    bytes4 internal constant TRANSFER_SPEC_MAGIC = 0xca85def7;
    bytes4 internal constant BURN_INTENT_MAGIC = 0x070afbc2;
    bytes4 internal constant ATTESTATION_MAGIC = 0xff6fb334;
    uint256 internal constant SPEC_FIXED = 340;

    bytes32 internal constant TRANSFER_SPEC_TYPEHASH = keccak256(
        "TransferSpec(uint32 version,uint32 sourceDomain,uint32 destinationDomain,bytes32 sourceContract,bytes32 destinationContract,bytes32 sourceToken,bytes32 destinationToken,bytes32 sourceDepositor,bytes32 destinationRecipient,bytes32 sourceSigner,bytes32 destinationCaller,uint256 value,bytes32 salt,bytes hookData)"
    );
    bytes32 internal constant BURN_INTENT_TYPEHASH = keccak256(
        "BurnIntent(uint256 maxBlockHeight,uint256 maxFee,TransferSpec spec)TransferSpec(uint32 version,uint32 sourceDomain,uint32 destinationDomain,bytes32 sourceContract,bytes32 destinationContract,bytes32 sourceToken,bytes32 destinationToken,bytes32 sourceDepositor,bytes32 destinationRecipient,bytes32 sourceSigner,bytes32 destinationCaller,uint256 value,bytes32 salt,bytes hookData)"
    );
    bytes32 internal constant DOMAIN_SEPARATOR = keccak256(abi.encode(keccak256("EIP712Domain(string name,string version)"), keccak256("GatewayWallet"), keccak256("1")));

    struct Spec {
        uint32 version;
        uint32 sourceDomain;
        uint32 destinationDomain;
        bytes32 sourceContract;
        bytes32 destinationContract;
        bytes32 sourceToken;
        bytes32 destinationToken;
        bytes32 sourceDepositor;
        bytes32 destinationRecipient;
        bytes32 sourceSigner;
        bytes32 destinationCaller;
        uint256 value;
        bytes32 salt;
        bytes hookData;
    }

    function word(bytes memory b, uint256 off) internal pure returns (bytes32 r) {
        require(b.length >= off + 32, "short");
        assembly {
            r := mload(add(add(b, 32), off))
        }
    }

    function u32(bytes memory b, uint256 off) internal pure returns (uint32) {
        require(b.length >= off + 4, "short");
        bytes32 w;
        assembly {
            w := mload(add(add(b, 32), off))
        }
        return uint32(uint256(w) >> 224);
    }

    function slice(bytes memory b, uint256 start, uint256 len) internal pure returns (bytes memory out) {
        require(b.length >= start + len, "short");
        out = new bytes(len);
        for (uint256 i = 0; i < len; i++) out[i] = b[start + i];
    }

    function decodeSpec(bytes memory s) internal pure returns (Spec memory spec) {
        require(s.length >= SPEC_FIXED && bytes4(word(s, 0)) == TRANSFER_SPEC_MAGIC, "TransferSpec magic");
        spec.version = u32(s, 4);
        spec.sourceDomain = u32(s, 8);
        spec.destinationDomain = u32(s, 12);
        spec.sourceContract = word(s, 16);
        spec.destinationContract = word(s, 48);
        spec.sourceToken = word(s, 80);
        spec.destinationToken = word(s, 112);
        spec.sourceDepositor = word(s, 144);
        spec.destinationRecipient = word(s, 176);
        spec.sourceSigner = word(s, 208);
        spec.destinationCaller = word(s, 240);
        spec.value = uint256(word(s, 272));
        spec.salt = word(s, 304);
        uint32 hookLen = u32(s, 336);
        require(s.length == SPEC_FIXED + hookLen, "TransferSpec length");
        spec.hookData = slice(s, SPEC_FIXED, hookLen);
    }

    /// EIP-712 struct hash of the encoded spec: the ten 32-byte fields from offset 16 are their own ABI words.
    function specStructHash(bytes memory s) internal pure returns (bytes32) {
        uint32 hookLen = u32(s, 336);
        return keccak256(
            abi.encodePacked(TRANSFER_SPEC_TYPEHASH, uint256(u32(s, 4)), uint256(u32(s, 8)), uint256(u32(s, 12)), slice(s, 16, 320), keccak256(slice(s, SPEC_FIXED, hookLen)))
        );
    }

    function toAddress(bytes32 w) internal pure returns (address) {
        require(uint256(w) >> 160 == 0, "not an address");
        return address(uint160(uint256(w)));
    }

    function recover(bytes32 digest, bytes memory sig) internal pure returns (address) {
        require(sig.length == 65, "signature length");
        bytes32 r = word(sig, 0);
        bytes32 s = word(sig, 32);
        uint8 v = uint8(sig[64]);
        if (v < 27) v += 27;
        require(v == 27 || v == 28, "signature v");
        require(uint256(s) <= 0x7FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF5D576E7357A4501DDFE92F46681B20A0, "signature s");
        address a = ecrecover(digest, v, r, s);
        require(a != address(0), "signature");
        return a;
    }

    function personal(bytes32 h) internal pure returns (bytes32) {
        return keccak256(abi.encodePacked("\x19Ethereum Signed Message:\n32", h));
    }
}

contract TestGatewayWallet {
    uint32 public immutable domain;
    address public burnSigner;
    address public feeRecipient;
    address public owner;
    mapping(address => bool) public isTokenSupported;
    mapping(address => mapping(address => uint256)) internal available;
    mapping(bytes32 => bool) public usedTransferSpecHash;

    event Deposited(address indexed token, address indexed depositor, address indexed sender, uint256 value);
    event GatewayBurned(
        address indexed token,
        address indexed depositor,
        bytes32 indexed transferSpecHash,
        uint32 destinationDomain,
        bytes32 destinationRecipient,
        address signer,
        uint256 value,
        uint256 fee,
        uint256 fromAvailable,
        uint256 fromWithdrawing
    );
    event InsufficientBalance(address indexed token, address indexed depositor, uint256 value, uint256 availableBalance, uint256 withdrawingBalance);

    error BurnFeeTooHighAtIndex(uint256 index);

    constructor(uint32 domain_, address burnSigner_, address feeRecipient_) {
        domain = domain_;
        burnSigner = burnSigner_;
        feeRecipient = feeRecipient_;
        owner = msg.sender;
    }

    function addSupportedToken(address token) external {
        require(msg.sender == owner, "owner");
        isTokenSupported[token] = true;
    }

    function deposit(address token, uint256 value) external {
        require(isTokenSupported[token], "UnsupportedToken");
        require(value > 0, "InvalidDepositValue");
        require(IGatewayTestToken(token).transferFrom(msg.sender, address(this), value), "transferFrom");
        available[token][msg.sender] += value;
        emit Deposited(token, msg.sender, msg.sender, value);
    }

    function availableBalance(address token, address depositor) external view returns (uint256) {
        return available[token][depositor];
    }

    function totalBalance(address token, address depositor) external view returns (uint256) {
        return available[token][depositor];
    }

    function burnIntentDigest(bytes memory intent) public pure returns (bytes32) {
        require(intent.length >= 72 && bytes4(GatewayCodec.word(intent, 0)) == GatewayCodec.BURN_INTENT_MAGIC, "BurnIntent magic");
        uint32 specLen = GatewayCodec.u32(intent, 68);
        require(intent.length == 72 + specLen, "BurnIntent length");
        bytes memory spec = GatewayCodec.slice(intent, 72, specLen);
        bytes32 structHash = keccak256(abi.encode(GatewayCodec.BURN_INTENT_TYPEHASH, uint256(GatewayCodec.word(intent, 4)), uint256(GatewayCodec.word(intent, 36)), GatewayCodec.specStructHash(spec)));
        return keccak256(abi.encodePacked("\x19\x01", GatewayCodec.DOMAIN_SEPARATOR, structHash));
    }

    /// The operator's burn: `calldataBytes` is abi.encode(bytes[] intents, bytes[] signatures, uint256[][] fees), signed by the burn signer.
    function gatewayBurn(bytes calldata calldataBytes, bytes calldata signature) external {
        require(GatewayCodec.recover(GatewayCodec.personal(keccak256(calldataBytes)), signature) == burnSigner, "InvalidBurnSigner");
        (bytes[] memory intents, bytes[] memory sigs, uint256[][] memory fees) = abi.decode(calldataBytes, (bytes[], bytes[], uint256[][]));
        require(intents.length == sigs.length && intents.length == fees.length, "lengths");
        for (uint256 i = 0; i < intents.length; i++) {
            require(fees[i].length == 1, "fees");
            _burnOne(i, intents[i], sigs[i], fees[i][0]);
        }
    }

    function _burnOne(uint256 index, bytes memory intent, bytes memory sig, uint256 fee) internal {
        bytes32 digest = burnIntentDigest(intent);
        uint256 maxBlockHeight = uint256(GatewayCodec.word(intent, 4));
        uint256 maxFee = uint256(GatewayCodec.word(intent, 36));
        bytes memory specBytes = GatewayCodec.slice(intent, 72, GatewayCodec.u32(intent, 68));
        GatewayCodec.Spec memory spec = GatewayCodec.decodeSpec(specBytes);
        require(spec.version == 1, "version");
        require(spec.sourceDomain == domain, "sourceDomain");
        require(GatewayCodec.toAddress(spec.sourceContract) == address(this), "sourceContract");
        address token = GatewayCodec.toAddress(spec.sourceToken);
        require(isTokenSupported[token], "UnsupportedToken");
        address signer = GatewayCodec.recover(digest, sig);
        require(signer == GatewayCodec.toAddress(spec.sourceSigner), "InvalidIntentSigner");
        address depositor = GatewayCodec.toAddress(spec.sourceDepositor);
        require(signer == depositor, "not the depositor");
        require(maxBlockHeight >= block.number, "BurnIntentExpired");
        if (fee > maxFee) revert BurnFeeTooHighAtIndex(index);
        bytes32 specHash = keccak256(specBytes);
        require(!usedTransferSpecHash[specHash], "TransferSpecHashUsed");
        uint256 bal = available[token][depositor];
        if (bal < spec.value + fee) {
            emit InsufficientBalance(token, depositor, spec.value + fee, bal, 0);
            return;
        }
        usedTransferSpecHash[specHash] = true;
        available[token][depositor] = bal - spec.value - fee;
        if (fee > 0) require(IGatewayTestToken(token).transfer(feeRecipient, fee), "fee");
        IGatewayTestToken(token).burn(spec.value);
        _emitBurned(token, specHash, spec, fee);
    }

    function _emitBurned(address token, bytes32 specHash, GatewayCodec.Spec memory spec, uint256 fee) internal {
        address depositor = GatewayCodec.toAddress(spec.sourceDepositor);
        emit GatewayBurned(token, depositor, specHash, spec.destinationDomain, spec.destinationRecipient, depositor, spec.value, fee, spec.value + fee, 0);
    }
}

contract TestGatewayMinter {
    uint32 public immutable domain;
    address public attestationSigner;
    address public owner;
    mapping(address => bool) public isTokenSupported;
    mapping(bytes32 => bool) public usedTransferSpecHash;

    event AttestationUsed(address indexed token, address indexed recipient, bytes32 indexed transferSpecHash, uint32 sourceDomain, bytes32 sourceDepositor, bytes32 sourceSigner, uint256 value);

    constructor(uint32 domain_, address attestationSigner_) {
        domain = domain_;
        attestationSigner = attestationSigner_;
        owner = msg.sender;
    }

    function addSupportedToken(address token) external {
        require(msg.sender == owner, "owner");
        isTokenSupported[token] = true;
    }

    function gatewayMint(bytes calldata attestationPayload, bytes calldata signature) external {
        require(GatewayCodec.recover(GatewayCodec.personal(keccak256(attestationPayload)), signature) == attestationSigner, "InvalidAttestationSigner");
        bytes memory a = attestationPayload;
        require(a.length >= 40 && bytes4(GatewayCodec.word(a, 0)) == GatewayCodec.ATTESTATION_MAGIC, "Attestation magic");
        require(uint256(GatewayCodec.word(a, 4)) >= block.number, "AttestationExpired");
        uint32 specLen = GatewayCodec.u32(a, 36);
        require(a.length == 40 + specLen, "Attestation length");
        bytes memory specBytes = GatewayCodec.slice(a, 40, specLen);
        GatewayCodec.Spec memory spec = GatewayCodec.decodeSpec(specBytes);
        require(spec.version == 1, "version");
        require(spec.value > 0, "AttestationValueZero");
        require(spec.destinationDomain == domain, "destinationDomain");
        require(GatewayCodec.toAddress(spec.destinationContract) == address(this), "destinationContract");
        address caller = GatewayCodec.toAddress(spec.destinationCaller);
        require(caller == address(0) || caller == msg.sender, "destinationCaller");
        address token = GatewayCodec.toAddress(spec.destinationToken);
        require(isTokenSupported[token], "UnsupportedToken");
        bytes32 specHash = keccak256(specBytes);
        require(!usedTransferSpecHash[specHash], "TransferSpecHashUsed");
        usedTransferSpecHash[specHash] = true;
        address recipient = GatewayCodec.toAddress(spec.destinationRecipient);
        IGatewayTestToken(token).mint(recipient, spec.value);
        emit AttestationUsed(token, recipient, specHash, spec.sourceDomain, spec.sourceDepositor, spec.sourceSigner, spec.value);
    }
}
